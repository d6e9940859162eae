#!/usr/bin/env python3
"""Per-GPU memory of a training step under PyTorch's data-parallel strategies,
measured on every rank (issue 17's harness; issue 18 runs it on 2, 4 and 8 GPUs).

usage: measure_dist.py OUT.json [--nproc N] [--models a,b] [--strategies s,t]
                       [--batches 8,32] [--shard-group N] [--dry-run]

Strategies, as `memest --strategy` names them (docs/distributed.md):
  none          the model alone on each GPU (no communication): the baseline
  ddp           DistributedDataParallel, 25 MiB buckets
  ddp-view      the same with gradient_as_bucket_view=True
  zero1         DDP with torch.distributed.optim.ZeroRedundancyOptimizer(Adam)
  fsdp          FSDP2 fully_shard on every block, then on the model
                (reshard_after_forward=True)
  fsdp-grad-op  the same with reshard_after_forward=False
  hsdp          FSDP2 on a 2-D mesh (replicate, shard), --shard-group GPUs
                per shard group (default: all of them)
  tp            tensor parallelism over every GPU (parallelize_module with
                ColwiseParallel and RowwiseParallel on each decoder layer's
                attention and MLP): the models of TP_PLANS only, others are
                skipped. Adam has two parameter groups, the split DTensors
                and the plain rest, since foreach Adam takes one kind per
                list; its step's temporaries are then the larger group's

BERT's pooler, which last_hidden_state never reads, is removed first: DDP
refuses parameters that get no gradient, and the ONNX export has none of it.

A block is what memest's `--strategy fsdp` shards as one group: an outermost
module whose name ends in an index in its container ("layer1.0",
"encoder.layer.3", "encoder_layer_3").

Each (model, strategy, batch) runs the truth protocol of
../shared/truth/README.md with Adam(lr=1e-4): three iterations of
zero_grad(set_to_none=True), y = model(x), loss = y.float().mean(),
loss.backward(), opt.step(), x being the per-GPU batch. Per rank it records:
  peak_iter[i]      max_memory_allocated during iteration i, less what was
                    allocated before the model existed
  peak              their maximum (the construction included)
  construct_peak    the same during construction and wrapping
  constructed       memory_allocated once the model is wrapped, less the base
  after_forward, after_backward, after_step: memory_allocated at those
                    points of each iteration, less the base
  reserved          max_memory_reserved over the run
  outside_allocator the device memory in use that PyTorch's allocator does not
                    hold (mem_get_info's used - memory_reserved), less the
                    same before the process group was made: NCCL's
                    communicators and buffers, cuDNN/cuBLAS handles
The top level has "nccl_init": that figure right after init_process_group and
one all_reduce.

--fresh runs each configuration as its own job (new processes and process
group), as a user runs one; otherwise one job runs them all in turn. Each
job's processes are forked from this one, which imports torch, torchvision
and transformers once and never touches CUDA, so a job starts in a second
rather than re-importing them (the measurement itself is unchanged: CUDA,
NCCL and the allocator start new in every process). Either
way cuBLAS and cuDNN are warmed up before the first baseline (as
../accuracy/measure.py does), so their workspaces are not counted.

--pause S makes the host sleep S seconds after each step (a probe of the
DDP race of docs/accuracy.md, not part of the protocol).

--dry-run checks the harness on a CPU: gloo backend, 2 processes unless
--nproc says otherwise, batch 2, no memory figures.
"""
import argparse
import copy
import gc
import json
import os
import platform
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "accuracy"))
import zoo  # noqa: E402

STRATEGIES = ["none", "ddp", "ddp-view", "zero1", "fsdp", "fsdp-grad-op", "hsdp", "tp"]
# tensor parallelism: the linear pairs of each decoder layer, as memest --tp finds them
TP_PLANS = {
    "llama_4l": ("m.layers", {"self_attn.q_proj": "col", "self_attn.k_proj": "col", "self_attn.v_proj": "col",
                              "self_attn.o_proj": "row", "mlp.gate_proj": "col", "mlp.up_proj": "col",
                              "mlp.down_proj": "row"}),
    "qwen2_4l": ("m.layers", {"self_attn.q_proj": "col", "self_attn.k_proj": "col", "self_attn.v_proj": "col",
                              "self_attn.o_proj": "row", "mlp.gate_proj": "col", "mlp.up_proj": "col",
                              "mlp.down_proj": "row"}),
    "bert_base": ("m.encoder.layer", {"attention.self.query": "col", "attention.self.key": "col",
                                      "attention.self.value": "col", "attention.output.dense": "row",
                                      "intermediate.dense": "col", "output.dense": "row"}),
}
ITERATIONS = 3
PAUSE = 0.0  # --pause S


def is_block_name(name):
    """memest's block rule (libestimate/checkpoint.c, est__is_block_name)."""
    last = name.rsplit(".", 1)[-1]
    digits = len(last) - len(last.rstrip("0123456789"))
    return digits > 0 and (digits == len(last) or last[-digits - 1] == "_")


def blocks(model):
    """The outermost modules with a block name, in registration order."""
    out = []
    for name, m in model.named_modules():
        if name and is_block_name(name) and not any(name.startswith(o + ".") for o, _ in out):
            out.append((name, m))
    return out


def warm_up(dev):
    """cuBLAS and cuDNN handles and the cuBLAS workspace exist before any
    baseline is read, as in ../accuracy/measure.py and the truth runs."""
    a = torch.randn(256, 256, device=dev, requires_grad=True)
    (a @ a).sum().backward()
    torch.nn.functional.linear(a, a, a[0]).sum().backward()
    c = torch.nn.Conv2d(3, 8, 3).to(dev)
    c(torch.randn(2, 3, 16, 16, device=dev)).sum().backward()
    torch.bmm(a[None], a[None])
    del a, c
    settle(dev)


def used_outside_allocator(dev):
    if dev.type != "cuda":
        return 0
    free, total = torch.cuda.mem_get_info(dev)
    return (total - free) - torch.cuda.memory_reserved(dev)


def wrap(strategy, model, dev, world, shard_group, name=None):
    """The model wrapped for the strategy, and its optimizer."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    ids = [dev.index] if dev.type == "cuda" else None
    if strategy == "none":
        model = model.to(dev)
        return model, torch.optim.Adam(model.parameters(), lr=1e-4)
    if strategy in ("ddp", "ddp-view", "zero1"):
        model = DDP(model.to(dev), device_ids=ids, bucket_cap_mb=25, gradient_as_bucket_view=strategy == "ddp-view")
        if strategy == "zero1":
            from torch.distributed.optim import ZeroRedundancyOptimizer
            return model, ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=1e-4)
        return model, torch.optim.Adam(model.parameters(), lr=1e-4)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    if strategy == "tp":
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
        mesh = init_device_mesh(dev.type, (world,))
        container, plan = TP_PLANS[name]
        model = model.to(dev)
        styles = {"col": ColwiseParallel, "row": RowwiseParallel}
        for layer in model.get_submodule(container):
            parallelize_module(layer, mesh, {k: styles[v]() for k, v in plan.items()})
        # foreach Adam takes one kind of tensor per list: the plan's DTensors
        # and the plain rest (embeddings, norms) are two parameter groups
        from torch.distributed.tensor import DTensor
        split = [p for p in model.parameters() if isinstance(p, DTensor)]
        plain = [p for p in model.parameters() if not isinstance(p, DTensor)]
        return model, torch.optim.Adam([{"params": split}, {"params": plain}], lr=1e-4)
    if strategy == "hsdp":
        mesh = init_device_mesh(dev.type, (world // shard_group, shard_group), mesh_dim_names=("replicate", "shard"))
    else:
        mesh = init_device_mesh(dev.type, (world,))
    reshard = strategy != "fsdp-grad-op"
    for _, m in blocks(model):
        fully_shard(m, mesh=mesh, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
    return model, torch.optim.Adam(model.parameters(), lr=1e-4)


def settle(dev):
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()


def allocated(dev):
    return torch.cuda.memory_allocated(dev) if dev.type == "cuda" else 0


def peak(dev):
    return torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else 0


def reset(dev):
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)


def measure(name, strategy, batch, dev, world, shard_group, outside0):
    settle(dev)
    base = allocated(dev)
    reset(dev)
    cpu_model = zoo.build(name).train()
    if getattr(getattr(cpu_model, "m", None), "pooler", None) is not None:
        cpu_model.m.pooler = None  # unused by last_hidden_state: DDP would refuse it, memest's export lacks it
    model, opt = wrap(strategy, copy.deepcopy(cpu_model), dev, world, shard_group, name)
    x = zoo.make_input(name, batch).to(dev)
    construct = peak(dev) - base
    phases = {"constructed": allocated(dev) - base, "after_forward": [], "after_backward": [], "after_step": []}
    peaks = []
    reserved = torch.cuda.max_memory_reserved(dev) if dev.type == "cuda" else 0
    for it in range(ITERATIONS):
        reset(dev)
        opt.zero_grad(set_to_none=True)
        y = model(x)
        loss = y.float().mean()
        phases["after_forward"].append(allocated(dev) - base)
        loss.backward()
        phases["after_backward"].append(allocated(dev) - base)
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        phases["after_step"].append(allocated(dev) - base)
        if PAUSE:
            time.sleep(PAUSE)  # --pause: the host idles between steps
        peaks.append(peak(dev) - base)
        if dev.type == "cuda":
            reserved = max(reserved, torch.cuda.max_memory_reserved(dev))
    outside = used_outside_allocator(dev) - outside0
    row = {"model": name, "strategy": strategy, "batch": batch, "rank": dist.get_rank(),
           "peak_iter": peaks, "peak": max(peaks + [construct]), "construct_peak": construct,
           **phases, "reserved": reserved, "outside_allocator": outside,
           "loss": float(loss.detach().float().cpu())}
    del y, loss, x, opt, model
    return row


def worker(rank, world, args, port):
    global PAUSE
    PAUSE = args.pause  # a spawned process starts from the module's default
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    if args.dry_run:
        dev = torch.device("cpu")
        backend = "gloo"
    else:
        dev = torch.device("cuda", rank)
        torch.cuda.set_device(dev)
        torch.zeros(1, device=dev)  # the CUDA context, before the baseline
        backend = "nccl"
    outside0 = used_outside_allocator(dev)
    dist.init_process_group(backend, rank=rank, world_size=world,
                            device_id=dev if dev.type == "cuda" else None)
    t = torch.ones(1, device=dev)
    dist.all_reduce(t)
    del t
    settle(dev)
    nccl_init = used_outside_allocator(dev) - outside0
    warm_up(dev)
    rows, errors = [], []
    shard_group = args.shard_group or world
    for name in args.models:
        for strategy in args.strategies:
            if strategy == "tp" and name not in TP_PLANS:
                continue
            for batch in args.batches:
                t0 = time.time()
                try:
                    row = measure(name, strategy, batch, dev, world, shard_group, outside0)
                    row["seconds"] = round(time.time() - t0, 2)
                    rows.append(row)
                    if rank == 0:
                        print(f"{name:12} {strategy:13} b{batch:<3} peak {row['peak'] / 2**20:9.1f} MiB "
                              f"reserved {row['reserved'] / 2**20:9.1f} MiB outside {row['outside_allocator'] / 2**20:7.1f} MiB "
                              f"({row['seconds']} s)", flush=True)
                except Exception as e:  # recorded; the other configurations still run
                    errors.append({"model": name, "strategy": strategy, "batch": batch, "rank": rank,
                                   "error": repr(e)[:400]})
                    if rank == 0:
                        print(f"{name:12} {strategy:13} b{batch:<3} ERROR {repr(e)[:200]}", flush=True)
                    settle(dev)
                dist.barrier()
    gathered = [None] * world
    dist.all_gather_object(gathered, {"rows": rows, "errors": errors, "nccl_init": nccl_init})
    if rank == 0:
        out = {"machine": {"host": platform.node(), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                           "gpus": [torch.cuda.get_device_name(i) for i in range(world)]
                           if not args.dry_run else ["cpu"] * world},
               "versions": {"torch": torch.__version__, "cuda": torch.version.cuda,
                            "nccl": ".".join(map(str, torch.cuda.nccl.version())) if not args.dry_run else None},
               "date": time.strftime("%Y-%m-%d"), "world_size": world, "shard_group": shard_group,
               "dry_run": args.dry_run, "nccl_init": [g["nccl_init"] for g in gathered],
               "runs": [r for g in gathered for r in g["rows"]],
               "errors": [e for g in gathered for e in g["errors"]]}
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
        print(f"wrote {args.out}: {len(out['runs'])} rank rows, {len(out['errors'])} errors")
    dist.destroy_process_group()


def free_port():
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def preload(models):
    """Import what the models' builders import, once, before the workers
    are forked (zoo.build imports torchvision and transformers lazily)."""
    import importlib
    for mod in ("torchvision", "transformers"):
        try:
            importlib.import_module(mod)
        except ImportError:
            pass


def launch(world, args, port):
    """One job: `world` worker processes forked from this one. The parent
    has not initialised CUDA (world comes from --nproc or nvidia-smi), so a
    forked child may. A port that another job took between free_port() and
    the rendezvous (jobs side by side in lanes) is given up for a new one."""
    for attempt in range(3):
        try:
            mp.start_processes(worker, args=(world, args, port), nprocs=world, join=True, start_method="fork")
            return
        except mp.ProcessRaisedException as e:
            if "EADDRINUSE" not in str(e) or attempt == 2:
                raise
            port = free_port()


def gpu_count():
    """GPUs visible to this job, without initialising CUDA here (a forked
    worker could not use it afterwards)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip()])
    import subprocess
    return len(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.splitlines())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--nproc", type=int)
    ap.add_argument("--models", default="resnet50,vit_b_16,bert_base,llama_4l")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--batches", default="8,32")
    ap.add_argument("--shard-group", type=int, default=0)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--fresh", action="store_true", help="a new job (processes, process group) per configuration")
    ap.add_argument("--pause", type=float, default=0.0, help="seconds the host sleeps after each step")
    args = ap.parse_args()
    global PAUSE
    PAUSE = args.pause
    args.models = args.models.split(",")
    args.strategies = args.strategies.split(",")
    for s in args.strategies:
        if s not in STRATEGIES:
            ap.error(f"unknown strategy {s} (one of {', '.join(STRATEGIES)})")
    args.batches = [2] if args.dry_run else [int(b) for b in args.batches.split(",")]
    world = args.nproc or (2 if args.dry_run else gpu_count())
    if args.shard_group and world % args.shard_group:
        ap.error(f"--shard-group {args.shard_group} does not divide {world} processes")
    port = free_port()
    preload(args.models)
    if not args.fresh:
        launch(world, args, port)
        return 0
    # one job of `world` processes per configuration, as a user runs one
    merged, out = None, args.out
    for name, strategy, batch in ((m, s, b) for m in args.models for s in args.strategies for b in args.batches
                                  if s != "tp" or m in TP_PLANS):
        one = copy.copy(args)
        one.models, one.strategies, one.batches, one.out = [name], [strategy], [batch], out + ".part"
        launch(world, one, free_port())
        part = json.load(open(one.out))
        if merged is None:
            merged = part
        else:
            merged["runs"] += part["runs"]
            merged["errors"] += part["errors"]
            merged["nccl_init"] += part["nccl_init"]
    os.remove(out + ".part")
    merged["fresh"] = True
    with open(out, "w") as f:
        json.dump(merged, f, indent=1)
    print(f"wrote {out}: {len(merged['runs'])} rank rows, {len(merged['errors'])} errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
