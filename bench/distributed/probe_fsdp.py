#!/usr/bin/env python3
"""What FSDP2 holds when: the caching allocator's trace of one training step
on rank 0, with the FSDP function that made or freed each block.

usage: probe_fsdp.py OUT.json [--models a,b] [--strategies fsdp,fsdp-grad-op]
                     [--batch 8] [--nproc 2]

Each (model, strategy) runs as measure_dist.py's protocol does (the same
wrapping and input; three iterations), with
torch.cuda.memory._record_memory_history on during the third. The trace is
cut to blocks of at least 1 MiB; for each it keeps the action (alloc or
free_requested), the bytes, the stream, allocated bytes after it (the running
sum over the whole trace, from memory_allocated at its start) and a label:
the innermost frame in torch/distributed/fsdp (what FSDP did), else the
innermost frame in the model's code or this script. Also recorded:
memory_allocated right after the model's forward returns (the root's
post-forward hooks done) and at the step's points, and the peak with the
labelled blocks live at it.
"""
import argparse
import copy
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import measure_dist as md  # noqa: E402
import probe_util  # noqa: E402  (bench/accuracy, on the path measure_dist sets)

MIB = 1 << 20


def label(frames):
    fsdp = [f for f in frames if "distributed/fsdp" in f["filename"]]
    if fsdp:
        f = fsdp[0]
        return f"fsdp:{os.path.basename(f['filename'])}:{f['name']}"
    return probe_util.trace_label(frames, ("transformers/", "torchvision/", "zoo.py", "probe_fsdp.py", "autograd"))


def cut(trace, start_allocated):
    events, alloc, live, peak = [], start_allocated, {}, (start_allocated, -1, [])
    for e in trace:
        act = e["action"]
        if act not in ("alloc", "free_requested"):
            continue
        size = e["size"]
        alloc += size if act == "alloc" else -size
        if act == "alloc":
            live[e["addr"]] = (size, label(e.get("frames", [])), e.get("stream", 0))
        else:
            live.pop(e["addr"], None)
        if size >= MIB:
            events.append({"action": act, "mib": round(size / MIB, 2), "stream": e.get("stream", 0),
                           "allocated_mib": round(alloc / MIB, 1), "what": label(e.get("frames", []))})
        if alloc > peak[0]:
            peak = (alloc, len(events) - 1, [(round(s / MIB, 2), w, st) for s, w, st in live.values() if s >= MIB])
    return events, {"allocated_mib": round(peak[0] / MIB, 1), "after_event": peak[1],
                    "live": sorted(peak[2], key=lambda x: -x[0])}


def probe(name, strategy, batch, dev, world):
    md.settle(dev)
    base = md.allocated(dev)
    cpu_model = md.zoo.build(name).train()
    if getattr(getattr(cpu_model, "m", None), "pooler", None) is not None:
        cpu_model.m.pooler = None
    model, opt = md.wrap(strategy, copy.deepcopy(cpu_model), dev, world, world, name)
    x = md.zoo.make_input(name, batch).to(dev)
    points = {}
    model.register_forward_hook(lambda m, i, o: points.__setitem__("root_forward_done", md.allocated(dev) - base))
    row = {}
    for it in range(md.ITERATIONS):
        last = it == md.ITERATIONS - 1
        torch.cuda.synchronize(dev)
        md.reset(dev)
        if last:
            start = md.allocated(dev)
            torch.cuda.memory._record_memory_history(max_entries=200000, context="alloc", stacks="python")
        opt.zero_grad(set_to_none=True)
        y = model(x)
        loss = y.float().mean()
        points["after_loss"] = md.allocated(dev) - base
        loss.backward()
        points["after_backward"] = md.allocated(dev) - base
        opt.step()
        torch.cuda.synchronize(dev)
        if last:
            snap = torch.cuda.memory._snapshot()
            torch.cuda.memory._record_memory_history(enabled=None)
            trace = snap["device_traces"][dev.index]
            events, at_peak = cut(trace, start - base)
            row = {"model": name, "strategy": strategy, "batch": batch, "world_size": world,
                   "peak_mib": round((md.peak(dev) - base) / MIB, 1),
                   "points_mib": {k: round(v / MIB, 1) for k, v in points.items()},
                   "trace_peak": at_peak, "events": events}
    del y, loss, x, opt, model
    return row


def worker(rank, world, args, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    torch.zeros(1, device=dev)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    md.warm_up(dev)
    rows = []
    for name in args.models.split(","):
        for strategy in args.strategies.split(","):
            try:
                row = probe(name, strategy, args.batch, dev, world)
                if rank == 0:
                    rows.append(row)
                    print(f"{name} {strategy}: peak {row['peak_mib']} MiB, points {row['points_mib']}", flush=True)
            except Exception as e:
                if rank == 0:
                    rows.append({"model": name, "strategy": strategy, "error": repr(e)[:400]})
                    print(f"{name} {strategy}: ERROR {e!r}"[:300], flush=True)
            md.settle(dev)
            dist.barrier()
    if rank == 0:
        out = {"date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
               "runs": rows}
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--models", default="bert_base,qwen2_4l")
    ap.add_argument("--strategies", default="fsdp,fsdp-grad-op")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--nproc", type=int, default=2)
    a = ap.parse_args()
    md.preload(a.models.split(","))
    mp.start_processes(worker, args=(a.nproc, a, md.free_port()), nprocs=a.nproc, join=True, start_method="fork")


if __name__ == "__main__":
    main()
