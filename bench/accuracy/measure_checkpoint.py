#!/usr/bin/env python3
"""Measure training peaks under activation checkpointing
(torch.utils.checkpoint, use_reentrant=False) on a CUDA GPU, with the
training protocol of measure.py (../shared/truth/README.md: 3 iterations of
zero_grad(set_to_none=True), y = model(x), loss = y.float().mean(),
loss.backward(), opt.step()), for SGD and Adam, each case also without
checkpointing for reference. compare_checkpoint.py sets memest --checkpoint
beside these numbers.

usage: measure_checkpoint.py OUT.json [--only MODEL,...] [--batches 8,32] [--amp bf16|fp16]
       measure_checkpoint.py --cpu-selftest [--only MODEL,...]

--amp bf16|fp16 measures under torch.autocast instead (forward and loss):
Adam only, each model without checkpointing and with its first spec
(every=1).

Cases (CASES below):
  resnet18, resnet50   every=1: each residual block (layerN[i]) a segment;
                       every=2: layerN[0:2], layerN[2:4], ... (a leftover block
                       alone) a segment; prefix "layer": layer1..layer4 each a segment
  bert_base            every=1: each m.encoder.layer[i];
                       prefix "m.encoder.layer.1": layers 1, 10, 11
  gpt2_6l              every=1: each m.h[i]; prefix "m.h.1": layer 1
  vit_b_16             every=1: each encoder.layers.encoder_layer_<i>

A segment is wrapped so that checkpoint() runs exactly its modules, in order,
on the segment's input: a one-module segment by replacing that instance's
forward with checkpoint(orig_forward, *args, use_reentrant=False, **kwargs); a
group of consecutive children of a Sequential by replacing the Sequential's
forward with one that runs each group through checkpoint(run_group, x). Module
names and parameters are unchanged.

memest_args are the memest flags that describe the same checkpointing
(`--checkpoint every=N` or `--checkpoint PREFIX[,PREFIX...]`): a block is an
outermost module whose last name component is an integer index of a
Sequential/ModuleList or ends in _<digits>; every=N groups N consecutive blocks
of the same parent; a PREFIX matches every outermost module whose qualified
name starts with it. memest_segments() implements those rules; --cpu-selftest
checks that they give exactly the segments wrapped here, that the checkpointed
model's gradients equal the plain model's, and (by forward-hook counts) that
exactly the modules inside the segments run twice.

OUT.json: {"torch", "device", "date", "transformers", "held_after_warm_up",
"cases": [{"model", "batch", "optimizer", "memest_optimizer", "checkpoint"
(null, {"every": N} or {"prefixes": [...]}), "memest_args", "segments",
"params", "buffers", "peak_iter", "peak", "steady_after_step", "reserved",
"reserved_base", "secs"} or {..., "error"}]}; peaks are bytes above what was
allocated before the model existed, as in truth.json. Written after each case.
"""
import copy
import json
import os
import re
import sys
import time

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402

OPTIMIZERS = ("sgd", "adam")
BATCHES = (8, 32)


# ---- which modules form the segments -------------------------------------------------------

def resnet_blocks(model):
    """[(layerN, [block names])] of a torchvision ResNet."""
    out = []
    for n in range(1, 5):
        layer = getattr(model, f"layer{n}")
        out.append((f"layer{n}", [f"layer{n}.{i}" for i in range(len(layer))]))
    return out


def resnet_every(model, every):
    segs = []
    for _, blocks in resnet_blocks(model):
        segs += [blocks[i:i + every] for i in range(0, len(blocks), every)]
    return segs


def hf_layers(model, name):
    if name == "bert_base":
        return [f"m.encoder.layer.{i}" for i in range(len(model.m.encoder.layer))]
    if name == "gpt2_6l":
        return [f"m.h.{i}" for i in range(len(model.m.h))]
    raise KeyError(name)


def vit_layers(model):
    return [f"encoder.layers.{n}" for n, _ in model.encoder.layers.named_children()]


# model -> [(checkpoint, segments(model))]; checkpoint is what memest is told
CASES = {
    "resnet18": [({"every": 1}, lambda m: resnet_every(m, 1)),
                 ({"every": 2}, lambda m: resnet_every(m, 2)),
                 ({"prefixes": ["layer"]}, lambda m: [[f"layer{n}"] for n in range(1, 5)])],
    "resnet50": [({"every": 1}, lambda m: resnet_every(m, 1)),
                 ({"every": 2}, lambda m: resnet_every(m, 2)),
                 ({"prefixes": ["layer"]}, lambda m: [[f"layer{n}"] for n in range(1, 5)])],
    "bert_base": [({"every": 1}, lambda m: [[n] for n in hf_layers(m, "bert_base")]),
                  ({"prefixes": ["m.encoder.layer.1"]},
                   lambda m: [["m.encoder.layer.1"], ["m.encoder.layer.10"], ["m.encoder.layer.11"]])],
    "gpt2_6l": [({"every": 1}, lambda m: [[n] for n in hf_layers(m, "gpt2_6l")]),
                ({"prefixes": ["m.h.1"]}, lambda m: [["m.h.1"]])],
    "vit_b_16": [({"every": 1}, lambda m: [[n] for n in vit_layers(m)])],
}


def memest_args(ckpt):
    if ckpt is None:
        return []
    if "every" in ckpt:
        return ["--checkpoint", f"every={ckpt['every']}"]
    return ["--checkpoint", ",".join(ckpt["prefixes"])]


def _parent(name):
    return name.rsplit(".", 1)[0] if "." in name else ""


def memest_segments(model, ckpt):
    """The segments memest's --checkpoint rules pick, from module names (and,
    for an integer last component, the parent's type)."""
    mods = dict(model.named_modules())
    chosen = []

    def inside_chosen(name):
        return any(name.startswith(c + ".") for c in chosen)

    if "every" in ckpt:
        for name, _ in model.named_modules():
            if not name or inside_chosen(name):
                continue
            last = name.rsplit(".", 1)[-1]
            indexed = last.isdigit() and isinstance(mods[_parent(name)], (nn.Sequential, nn.ModuleList))
            if indexed or re.search(r"_\d+$", last):
                chosen.append(name)
        groups, segs = {}, []
        for name in chosen:  # named_modules order: children in order
            groups.setdefault(_parent(name), []).append(name)
        for blocks in groups.values():
            n = ckpt["every"]
            segs += [blocks[i:i + n] for i in range(0, len(blocks), n)]
        return segs
    for name, _ in model.named_modules():
        if name and not inside_chosen(name) and any(name.startswith(p) for p in ckpt["prefixes"]):
            chosen.append(name)
    return [[c] for c in chosen]


# ---- wrapping --------------------------------------------------------------------------------

_CHECKPOINT_KWARGS = {"use_reentrant", "context_fn", "determinism_check", "debug", "early_stop",
                      "preserve_rng_state"}


def wrap_forward(mod):
    """mod's call becomes one checkpoint segment running its own forward."""
    orig = mod.forward

    def forward(*args, **kwargs):
        if _CHECKPOINT_KWARGS.isdisjoint(kwargs):
            return checkpoint(orig, *args, use_reentrant=False, **kwargs)
        return checkpoint(lambda *a: orig(*a, **kwargs), *args, use_reentrant=False)

    mod.forward = forward


def _run_group(mods):
    def run(x):
        for m in mods:
            x = m(x)
        return x
    return run


def wrap_sequential_groups(seq, groups):
    """seq (a Sequential) runs each group of its children (lists of child
    names, consecutive) as one checkpoint segment, the other children plainly."""
    if not isinstance(seq, nn.Sequential):
        raise TypeError(f"a multi-module segment needs a Sequential parent, not {type(seq).__name__}")
    names = list(seq._modules)
    plan, i = [], 0  # [(callable, checkpointed)]
    starts = {g[0]: g for g in groups}
    while i < len(names):
        g = starts.get(names[i])
        if g is None:
            plan.append((seq._modules[names[i]], False))
            i += 1
            continue
        if names[i:i + len(g)] != g:
            raise ValueError(f"group {g} is not consecutive in {names}")
        plan.append((_run_group([seq._modules[n] for n in g]), True))
        i += len(g)

    def forward(x):
        for f, ck in plan:
            x = checkpoint(f, x, use_reentrant=False) if ck else f(x)
        return x

    seq.forward = forward


def apply_segments(model, segments):
    mods = dict(model.named_modules())
    by_parent = {}
    for seg in segments:
        if len(seg) == 1:
            wrap_forward(mods[seg[0]])
            continue
        parent = _parent(seg[0])
        if any(_parent(n) != parent for n in seg):
            raise ValueError(f"segment {seg} spans parents")
        by_parent.setdefault(parent, []).append([n.rsplit(".", 1)[-1] for n in seg])
    for parent, groups in by_parent.items():
        wrap_sequential_groups(mods[parent], groups)


def configs(name, model):
    """[(checkpoint, segments)], the reference (None, None) first."""
    return [(None, None)] + [(ck, seg(model)) for ck, seg in CASES[name]]


# ---- GPU measurement -------------------------------------------------------------------------

def run_gpu(out_path, names, batches, amp=None):
    import measure
    result = {"torch": torch.__version__, "device": torch.cuda.get_device_name(),
              "cudnn": torch.backends.cudnn.version(), "date": time.strftime("%Y-%m-%d"), "cases": []}
    try:
        import transformers
        result["transformers"] = transformers.__version__
    except ImportError:
        pass
    result["held_after_warm_up"] = measure.warm_up()
    result["reserved_after_warm_up"] = torch.cuda.memory_reserved()
    t_all = time.time()
    for name in names:
        try:
            cpu_model = zoo.build(name)
            cfgs = configs(name, cpu_model)
        except Exception as e:
            import traceback
            traceback.print_exc()
            result["cases"].append({"model": name, "error": repr(e)[:500]})
            continue
        if amp:  # under autocast: Adam, the reference and the first spec (every=1)
            cfgs = cfgs[:2]
        for b in batches:
            for opt in (("adam",) if amp else OPTIMIZERS):
                for ckpt, segs in cfgs:
                    case = {"model": name, "batch": b, "optimizer": opt, "memest_optimizer": opt,
                            "checkpoint": ckpt, "memest_args": memest_args(ckpt) + (["--amp", amp] if amp else []),
                            "segments": segs, "amp": amp}
                    t0 = time.time()
                    try:
                        prepare = None if segs is None else (lambda m, s=segs: apply_segments(m, s))
                        r = measure.measure_train(cpu_model, name, b, opt, prepare=prepare, amp=amp)
                        case.update(r)
                    except Exception as e:  # one case's failure must not lose the others
                        import traceback
                        traceback.print_exc()
                        case["error"] = repr(e)[:500]
                    case["secs"] = round(time.time() - t0, 2)
                    result["cases"].append(case)
                    with open(out_path, "w") as f:
                        json.dump(result, f, indent=1)
                    pk = f"{case['peak'] / 2**20:9.1f} MiB" if "peak" in case else "ERROR"
                    print(f"{name:10} b{b:<3} {opt:4} {' '.join(case['memest_args']) or '(none)':34} {pk}"
                          f"  {case['secs']:.1f} s", flush=True)
    print(f"all cases: {time.time() - t_all:.1f} s", flush=True)


# ---- CPU self-test ---------------------------------------------------------------------------

def _grads_and_counts(model, x):
    counts = {}
    hooks = [m.register_forward_hook(lambda mod, i, o, n=n: counts.__setitem__(n, counts.get(n, 0) + 1))
             for n, m in model.named_modules() if not list(m.children())]  # leaves
    torch.manual_seed(2)
    y = model(x)
    y.float().mean().backward()
    for h in hooks:
        h.remove()
    return {n: p.grad for n, p in model.named_parameters()}, counts


def selftest(names, batch=2):
    ok = True
    for name in names:
        t0 = time.time()
        cpu_model = zoo.build(name)
        x = zoo.make_input(name, batch)
        ref = copy.deepcopy(cpu_model).train()
        g_ref, c_ref = _grads_and_counts(ref, x)
        for ckpt, segs in configs(name, cpu_model)[1:]:
            problems = []
            rule = memest_segments(cpu_model, ckpt)
            if rule != segs:
                problems.append(f"memest rules give {rule}, wrapped {segs}")
            model = copy.deepcopy(cpu_model).train()
            apply_segments(model, segs)
            with torch.utils.checkpoint.set_checkpoint_early_stop(False):  # recompute whole segments
                g, c = _grads_and_counts(model, x)
            worst = 0.0
            for n, gr in g_ref.items():
                if (gr is None) != (g[n] is None):
                    problems.append(f"grad of {n}: {gr is None} vs {g[n] is None}")
                elif gr is not None:
                    worst = max(worst, (gr - g[n]).abs().max().item() / (gr.abs().max().item() or 1.0))
            if worst > 1e-5:
                problems.append(f"gradients differ: max relative {worst:.2e}")
            inside = [n for s in segs for n in s]
            for n, k in c_ref.items():
                want = 2 if any(n == p or n.startswith(p + ".") for p in inside) else 1
                if c.get(n, 0) != want * k:
                    problems.append(f"{n} ran {c.get(n, 0)} times, want {want * k}")
            twice = sum(1 for n, k in c_ref.items() if c.get(n, 0) == 2 * k)
            status = "ok" if not problems else "FAIL"
            ok &= not problems
            print(f"{name:10} {' '.join(memest_args(ckpt)):34} {len(segs):3} segments, {twice:4} leaves "
                  f"recomputed, grad max rel diff {worst:.1e}: {status}", flush=True)
            for p in problems[:8]:
                print("    " + p)
        print(f"{name}: {time.time() - t0:.1f} s", flush=True)
    return ok


def main():
    args = sys.argv[1:]
    only, batches, out_path, cpu, amp = None, list(BATCHES), None, False, None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--cpu-selftest":
            cpu = True
        elif a in ("--only", "--batches", "--amp") and i + 1 < len(args):
            if a == "--only":
                only = args[i + 1].split(",")
            elif a == "--amp":
                amp = args[i + 1]
            else:
                batches = [int(v) for v in args[i + 1].split(",")]
            i += 1
        elif a.startswith("-") or out_path:
            sys.exit(__doc__)
        else:
            out_path = a
        i += 1
    names = only or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        sys.exit(f"no checkpoint cases for {unknown}; known: {list(CASES)}")
    if cpu:
        return 0 if selftest(names) else 1
    if not out_path:
        sys.exit(__doc__)
    run_gpu(out_path, names, batches, amp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
