#!/usr/bin/env python3
"""Measure PyTorch's real peak memory for the fine-tuning cases of
finetune_zoo.py on a CUDA GPU, with the training protocol of
../shared/truth/README.md.

usage: measure_finetune.py OUT.json [--only ID,...] [--small-budget S] [--deadline S]
       measure_finetune.py --cpu-selftest [--only ID,...]

Each row (case, batch, seq): settle() (gc, synchronize, empty_cache); base =
memory_allocated(); reset_peak_memory_stats(); the model is made on the GPU
(a deep copy of a CPU-built model moved there, or, for the 8B case, built
directly on the GPU in bf16), put in train mode; the optimizer over the
trainable parameters only ([p for p in model.parameters() if p.requires_grad]:
AdamW(lr=1e-4), PyTorch's default foreach implementation, or
torch.optim.Adafactor()); the input. Then 3 iterations of
opt.zero_grad(set_to_none=True); y = model(x); loss = y.float().mean();
loss.backward(); opt.step(); with gradient accumulation each iteration is
zero_grad; 4 x (y = model(x); loss = y.float().mean() / 4; loss.backward());
opt.step(). The previous y and loss live until rebound, as in the truth. A
case with amp runs the forward pass and the loss under torch.autocast("cuda",
dtype=...), as the truth's train_amp_* rows do.

Per row: "peak" = max_memory_allocated() - base over the whole row (model
creation included), "peak_iter" the same for each iteration (peak stats reset
before it), "creation_peak" before the first iteration, "reserved" =
max_memory_reserved() over the row, "reserved_iter", "reserved_base",
"steady_after_step", "params_bytes", "trainable_params", "trainable_bytes",
"oom" (true: torch.OutOfMemoryError; then "peak_at_oom" and "error"), "secs".
Rows are written after each one. A row is "skipped" when a row of the same
case with no larger batch and seq ran out of memory, or when its time budget
is spent: --small-budget (default 380 s) for every case before the 8B ones,
--deadline (default 505 s from the start) for all.

Per case ("cases"): its definition (finetune_zoo.CASE), the memest flags, the
number and bytes of parameters, the trainable parameter names, the
checkpointed module names (Hugging Face checkpoints each decoder layer, a
GradientCheckpointingLayer) and whether the input embeddings' output is made
to require grad (peft does so when the base model checkpoints).

--cpu-selftest runs every case at tiny dims on the CPU (no memory stats): the
protocol, that exactly the parameters memest's --trainable pattern names get
gradients, Adafactor and accumulation steps, and the checkpointed modules;
then builds each full-size model on the meta device and prints its
parameter counts.
"""
import argparse
import copy
import gc
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import finetune_zoo as fz  # noqa: E402

ITERATIONS = 3
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def settle():
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def warm_up():
    """cuBLAS and cuDNN handles and the cuBLAS workspace exist before any
    baseline is read (as measure.py's warm_up), in float32 and bf16."""
    before = torch.cuda.memory_allocated()
    for dt in (torch.float32, torch.bfloat16):
        a = torch.randn(256, 256, device="cuda", dtype=dt, requires_grad=True)
        (a @ a).float().sum().backward()
        torch.nn.functional.linear(a, a, a[0]).float().sum().backward()
        q = torch.randn(1, 2, 64, 64, device="cuda", dtype=dt, requires_grad=True)
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).float().sum().backward()
        del a, q
    c = torch.nn.Conv2d(3, 8, 3).cuda()
    c(torch.randn(2, 3, 16, 16, device="cuda")).sum().backward()
    del c
    settle()
    return torch.cuda.memory_allocated() - before


def trainable(model):
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def case_facts(case, model):
    tr = trainable(model)
    emb_hook = False
    try:
        emb_hook = bool(model.m.get_input_embeddings()._forward_hooks)
    except AttributeError:
        pass
    return {**case, "memest_args_example": fz.memest_args(case, case["batches"][0],
                                                          case["seqs"][0] if case["seqs"] else None),
            "n_params": sum(p.numel() for p in model.parameters()),
            "params_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
            "buffers_bytes": sum(b.numel() * b.element_size() for b in model.buffers()),
            "param_dtypes": sorted({str(p.dtype) for p in model.parameters()}),
            "trainable_params": sum(p.numel() for _, p in tr),
            "trainable_bytes": sum(p.numel() * p.element_size() for _, p in tr),
            "trainable_names": [n for n, _ in tr],
            "checkpointed_modules": fz.checkpointed_modules(model),
            "input_embeddings_require_grad_hook": emb_hook}


AMP = {None: None, "bf16": torch.bfloat16}


def step(model, opt, x, accum, prev, amp=None):
    """One iteration of the protocol. `prev` holds the previous iteration's
    [y, loss]; as in the truth's inline loop, they are rebound (and so freed)
    as soon as the new forward returns, not when the iteration ends. With
    amp, the forward pass and the loss run under torch.autocast (the truth's
    train_amp_* protocol). Returns the list with this iteration's y and loss."""
    opt.zero_grad(set_to_none=True)
    for _ in range(accum):
        with torch.autocast("cuda", dtype=AMP[amp], enabled=amp is not None):
            prev[0] = model(x)
            prev[1] = prev[0].float().mean() if accum == 1 else prev[0].float().mean() / accum
        prev[1].backward()
    opt.step()
    return prev


def make_model(case, cpu_model, device):
    if case["build_on_device"]:
        model = fz.build(case["model"], device=device, dtype=DTYPES[case["dtype"]], checkpoint=case["checkpoint"])
    else:
        model = copy.deepcopy(cpu_model).to(device)
    fz.set_trainable(model, case)
    return model.train()


def protocol(case, cpu_model, batch, seq, facts, base, row):
    """Model, optimizer, input and the iterations; fills row. Its locals (the
    model and everything the step made) die with its frame, also when it
    raises: the caller's except clause drops the traceback."""
    model = make_model(case, cpu_model, "cuda")
    if facts is not None and case["id"] not in facts:
        facts[case["id"]] = case_facts(case, model)
    opt = fz.make_optimizer(case, [p for p in model.parameters() if p.requires_grad])
    x = fz.make_input(case["model"], batch, seq).cuda()
    torch.cuda.synchronize()
    row["creation_peak"] = torch.cuda.max_memory_allocated() - base
    peaks, reserved = [], []
    prev = [None, None]  # y and loss, alive until the next forward rebinds them
    for _ in range(ITERATIONS):
        torch.cuda.reset_peak_memory_stats()
        step(model, opt, x, case["grad_accum"], prev, case.get("amp"))  # no other reference to y
        torch.cuda.synchronize()
        peaks.append(torch.cuda.max_memory_allocated() - base)
        reserved.append(torch.cuda.max_memory_reserved())
    row.update(peak=max([row["creation_peak"]] + peaks), peak_iter=peaks, reserved=max(reserved),
               reserved_iter=reserved, steady_after_step=torch.cuda.memory_allocated() - base,
               params_bytes=sum(p.numel() * p.element_size() for p in model.parameters()),
               trainable_params=sum(p.numel() for p in model.parameters() if p.requires_grad),
               trainable_bytes=sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad),
               loss=float(prev[1]))


def measure_row(case, cpu_model, batch, seq, facts):
    """The protocol for one (case, batch, seq) on the GPU."""
    settle()
    base = torch.cuda.memory_allocated()
    reserved_base = torch.cuda.memory_reserved()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    row = {"case": case["id"], "batch": batch, "seq": seq, "reserved_base": reserved_base, "oom": False}
    try:
        protocol(case, cpu_model, batch, seq, facts, base, row)
    except torch.OutOfMemoryError as e:
        row.update(oom=True, peak_at_oom=torch.cuda.max_memory_allocated() - base,
                   reserved=torch.cuda.max_memory_reserved(), error=str(e).splitlines()[0][:300])
    except Exception as e:  # one row's failure must not lose the others
        import traceback
        traceback.print_exc()
        row["error"] = repr(e)[:500]
    settle()
    row["held_after_row"] = torch.cuda.memory_allocated() - base
    row["secs"] = round(time.time() - t0, 2)
    return row


def rows_of(case):
    seqs = case["seqs"] or [None]
    return [(b, s) for s in seqs for b in case["batches"]]


def machine_facts():
    import platform
    p = torch.cuda.get_device_properties(0)
    out = {"device": torch.cuda.get_device_name(), "total_memory": p.total_memory,
           "multiprocessors": p.multi_processor_count, "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "cudnn_benchmark": torch.backends.cudnn.benchmark,
           "python": platform.python_version(), "date": time.strftime("%Y-%m-%d"),
           "sdp_flash": torch.backends.cuda.flash_sdp_enabled(),
           "sdp_mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
           "matmul_tf32": torch.backends.cuda.matmul.allow_tf32}
    for m in ("transformers", "peft", "torchvision"):
        try:
            out[m] = __import__(m).__version__
        except ImportError:
            out[m] = None
    return out


def run(out_path, only, small_budget, deadline):
    t_start = time.time()
    result = {**machine_facts(), "protocol": "../shared/truth/README.md training protocol; finetune_zoo.py cases",
              "iterations": ITERATIONS}
    result["held_after_warm_up"] = warm_up()
    result["reserved_after_warm_up"] = torch.cuda.memory_reserved()
    result["cases"], result["rows"] = {}, []

    def save():
        result["elapsed_s"] = round(time.time() - t_start, 1)
        with open(out_path + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
        os.replace(out_path + ".tmp", out_path)

    cpu_key, cpu_model = None, None
    for case in fz.CASES:
        if only and case["id"] not in only:
            continue
        t_case = time.time()
        budget = deadline if case["build_on_device"] else min(small_budget, deadline)
        if not case["build_on_device"] and (case["model"], case["dtype"]) != cpu_key:
            cpu_model = None
            gc.collect()
            if time.time() - t_start < budget:
                cpu_model = fz.build(case["model"], dtype=DTYPES[case["dtype"]])
                cpu_key = (case["model"], case["dtype"])
        ooms = []
        for b, s in rows_of(case):
            if time.time() - t_start >= budget:
                row = {"case": case["id"], "batch": b, "seq": s, "skipped": "time budget spent"}
            elif any(b >= ob and (s or 0) >= (os_ or 0) for ob, os_ in ooms):
                row = {"case": case["id"], "batch": b, "seq": s, "skipped": "a row with no larger batch and seq ran out of memory"}
            else:
                row = measure_row(case, cpu_model, b, s, result["cases"])
                if row.get("oom"):
                    ooms.append((b, s))
            result["rows"].append(row)
            save()
            if "peak" in row:
                print(f"{case['id']:34} b{b:<2} s{s or '-':<5} peak {row['peak'] / 2**20:10.1f} MiB  reserved "
                      f"{row['reserved'] / 2**20:10.1f} MiB  {row['secs']:.1f} s", flush=True)
            else:
                print(f"{case['id']:34} b{b:<2} s{s or '-':<5} "
                      f"{'OOM' if row.get('oom') else ''} {row.get('skipped') or row.get('error', '')}"[:160], flush=True)
        print(f"  {case['id']}: {time.time() - t_case:.1f} s (total {time.time() - t_start:.1f} s)", flush=True)
    del cpu_model
    save()
    n = len(result["rows"])
    n_ok = sum(1 for r in result["rows"] if "peak" in r)
    n_oom = sum(1 for r in result["rows"] if r.get("oom"))
    print(f"rows {n}: measured {n_ok}, OOM {n_oom}, other {n - n_ok - n_oom}; {time.time() - t_start:.1f} s")


# ---- CPU self-test ------------------------------------------------------------------------------

def selftest(only):
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    bad = 0
    for case in fz.CASES:
        if only and case["id"] not in only:
            continue
        t0 = time.time()
        model = fz.build(case["model"], dtype=DTYPES[case["dtype"]], tiny=True, checkpoint=case["checkpoint"])
        fz.set_trainable(model, case)
        model.train()
        names = [n for n, _ in trainable(model)]
        want = [n for n, _ in model.named_parameters() if fz.matches(case["trainable"], n)]
        problems = []
        if names != want:
            problems.append(f"trainable {len(names)} != pattern {case['trainable']!r} {len(want)}: "
                            f"{sorted(set(names) ^ set(want))[:4]}")
        if not names:
            problems.append("nothing trainable")
        opt = fz.make_optimizer(case, [p for _, p in trainable(model)])
        x = fz.make_input(case["model"], 2, 16 if case["seqs"] else None, tiny=True)
        before = {n: p.detach().clone() for n, p in trainable(model)}
        for _ in range(2):
            y, loss = step(model, opt, x, case["grad_accum"], [None, None])
        if not torch.isfinite(loss):
            problems.append(f"loss {loss}")
        nograd = [n for n, p in trainable(model) if p.grad is None]
        if nograd:
            problems.append(f"no grad: {nograd[:3]}")
        frozen_grad = [n for n, p in model.named_parameters() if not p.requires_grad and p.grad is not None]
        if frozen_grad:
            problems.append(f"frozen with grad: {frozen_grad[:3]}")
        unchanged = [n for n, p in trainable(model) if torch.equal(before[n], p.detach())]
        # Adafactor may leave zero-init lora_B at 0; in bf16 an lr of 1e-4 can be
        # below the resolution of DoRA's magnitudes (about 1)
        if unchanged and case["optimizer"] != "adafactor" and case["dtype"] == "float32":
            problems.append(f"not updated: {unchanged[:3]}")
        ck = fz.checkpointed_modules(model)
        if case["checkpoint"]:
            nlayers = len(model.m.get_base_model().model.layers) if case["adapter"] else 0
            if len(ck) != nlayers or not all(".layers." in n for n in ck):
                problems.append(f"checkpointed {ck}")
        elif ck:
            problems.append(f"checkpointed without asking: {ck}")
        facts = case_facts(case, model)
        print(f"{case['id']:34} tiny: trainable {len(names):4} tensors {facts['trainable_params']:9} params, "
              f"dtypes {facts['param_dtypes']}, ckpt {len(ck)}, y {tuple(y.shape)} {y.dtype}, "
              f"{time.time() - t0:.1f} s  " + ("; ".join(problems) if problems else "ok"), flush=True)
        bad += bool(problems)
    # full size, on the meta device: the parameter counts the GPU run will see
    seen = set()
    for case in fz.CASES:
        if (only and case["id"] not in only) or case["model"] in seen:
            continue
        seen.add(case["model"])
        t0 = time.time()
        m = fz.build(case["model"], device="meta", dtype=DTYPES[case["dtype"]])
        fz.set_trainable(m, case)
        n = sum(p.numel() for p in m.parameters())
        t = sum(p.numel() for p in m.parameters() if p.requires_grad)
        print(f"{case['model']:34} full size: {n / 1e6:9.2f} M params, {t / 1e6:8.3f} M trainable "
              f"({case['id']}), built on meta in {time.time() - t0:.1f} s", flush=True)
        del m
    print("selftest:", "FAILED" if bad else "ok")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--only", default="", help="case ids, comma-separated (default: all)")
    ap.add_argument("--cpu-selftest", action="store_true")
    ap.add_argument("--small-budget", type=float, default=380.0)
    ap.add_argument("--deadline", type=float, default=505.0)
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    unknown = only - set(fz.CASE)
    if unknown:
        sys.exit(f"unknown case ids: {sorted(unknown)}")
    if a.cpu_selftest:
        return selftest(only)
    if not a.out:
        sys.exit("usage: measure_finetune.py OUT.json [--only ID,...] | --cpu-selftest")
    if not torch.cuda.is_available():
        sys.exit("measure_finetune.py needs a CUDA GPU (or --cpu-selftest)")
    run(a.out, only, a.small_budget, a.deadline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
