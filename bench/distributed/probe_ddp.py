#!/usr/bin/env python3
"""Which blocks DDP holds in the second iteration: the live allocations of
at least 1 MiB after each phase of iterations 1-3, with the Python frames
that made them (torch.cuda.memory._record_memory_history), for one model
under ddp or ddp-view at world size 1.

usage: probe_ddp.py OUT.json MODEL [ddp|ddp-view|zero1] [BATCH]
"""
import json
import os
import sys

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import measure_dist  # noqa: E402


def live_blocks(label):
    snap = torch.cuda.memory._snapshot()
    out = []
    for seg in snap["segments"]:
        for b in seg["blocks"]:
            if b["state"] != "active_allocated" or b["size"] < (1 << 20):
                continue
            frames = [f"{f['filename'].split('/')[-1]}:{f['line']}:{f['name']}" for f in b.get("frames", [])
                      if f["filename"].endswith(".py")][:6]
            out.append({"size": b["size"], "frames": frames})
    out.sort(key=lambda b: -b["size"])
    return {"at": label, "allocated": torch.cuda.memory_allocated(), "blocks": out}


def main():
    out, name = sys.argv[1], sys.argv[2]
    strategy = sys.argv[3] if len(sys.argv) > 3 else "ddp-view"
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(measure_dist.free_port()))
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=dev)
    measure_dist.warm_up(dev)
    torch.cuda.memory._record_memory_history(max_entries=200000)
    model = measure_dist.zoo.build(name).train()
    if getattr(getattr(model, "m", None), "pooler", None) is not None:
        model.m.pooler = None
    model, opt = measure_dist.wrap(strategy, model, dev, 1, 1)
    x = measure_dist.zoo.make_input(name, batch).to(dev)
    shots = [live_blocks("constructed")]
    for it in range(3):
        opt.zero_grad(set_to_none=True)
        y = model(x)
        loss = y.float().mean()
        shots.append(live_blocks(f"iter{it + 1} after forward"))
        loss.backward()
        shots.append(live_blocks(f"iter{it + 1} after backward"))
        opt.step()
        torch.cuda.synchronize()
    with open(out, "w") as f:
        json.dump({"model": name, "strategy": strategy, "batch": batch, "torch": torch.__version__,
                   "gpu": torch.cuda.get_device_name(0), "snapshots": shots}, f, indent=1)
    for s in shots:
        print(f"{s['at']:24} allocated {s['allocated'] / 2**20:8.1f} MiB, {len(s['blocks'])} blocks >= 1 MiB")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
