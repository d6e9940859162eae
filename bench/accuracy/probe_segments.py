#!/usr/bin/env python3
"""Which allocations make the caching allocator's segments in a training
step: the evidence for the reserved-memory replay (libestimate/caching.c).

usage (on a GPU machine): probe_segments.py OUT.json [MODEL:BATCH:OPT ...]
(default resnet50:32:adam resnet50:8:adam vit_b_16:32:adam)

Each configuration runs measure.py's training protocol (the model made on
the GPU, three iterations of zero_grad, forward, y.float().mean(), backward,
step) with torch.cuda.memory._record_memory_history on from before the
model exists. It keeps:
  segments      every segment_alloc and segment_free in order: its bytes,
                stream, the iteration (0: the model and input; 1-3), and the
                allocation that asked for it (bytes, and the innermost
                Python frame of the model's code, if any)
  final         the segments at the end: bytes, pool (large or small) and
                the largest block in each
  reserved      max_memory_reserved and max_memory_allocated above what the
                process held before the model
"""
import copy
import json
import sys

import torch

import measure
import probe_util
import zoo

MIB = 1 << 20


# the files whose frames name what asked for a block
FRAME_MARKERS = ("torchvision/", "transformers/", "zoo.py", "torch/nn/modules", "torch/optim")


def frame_label(frames):
    return probe_util.trace_label(frames, FRAME_MARKERS)


def segment_events(trace, marks):
    """The segment events of trace, each with the allocation that asked for
    it (the next alloc event of a segment_alloc) and its iteration."""
    out, pending = [], None
    for i, e in enumerate(trace):
        it = sum(1 for m in marks if i >= m)
        act = e["action"]
        if act in ("segment_alloc", "segment_free"):
            rec = {"action": act, "mib": round(e["size"] / MIB, 3), "stream": e.get("stream", 0), "iteration": it}
            out.append(rec)
            if act == "segment_alloc":
                pending = rec
        elif act == "alloc" and pending is not None:
            pending["for_mib"] = round(e["size"] / MIB, 3)
            pending["what"] = frame_label(e.get("frames", []))
            pending = None
    return out


def probe(name, batch, kind):
    measure.settle()
    base_alloc = torch.cuda.memory_allocated()
    base_res = torch.cuda.memory_reserved()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=1000000, context="alloc", stacks="python")
    cpu_model = zoo.build(name).train()
    model = copy.deepcopy(cpu_model).cuda().train()
    opt = measure.optimizer(kind, model.parameters())
    x = zoo.make_input(name, batch).cuda()
    marks = []
    for _ in range(measure.ITERATIONS):
        marks.append(len(torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()]))
        opt.zero_grad(set_to_none=True)
        y = model(x)
        loss = y.float().mean()
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    trace = snap["device_traces"][torch.cuda.current_device()]
    final = [{"mib": round(s["total_size"] / MIB, 3), "pool": s.get("segment_type", "?"), "stream": s.get("stream", 0),
              "largest_block_mib": round(max((b["size"] for b in s["blocks"]), default=0) / MIB, 3)}
             for s in snap["segments"]]
    row = {"model": name, "batch": batch, "optimizer": kind,
           "reserved": torch.cuda.max_memory_reserved() - base_res,
           "allocated": torch.cuda.max_memory_allocated() - base_alloc,
           "segments": segment_events(trace, marks), "final": final,
           "trace_truncated": len(trace) >= 1000000}
    del y, loss, x, opt, model
    return row


def main():
    out = sys.argv[1]
    configs = sys.argv[2:] or ["resnet50:32:adam", "resnet50:8:adam", "vit_b_16:32:adam"]
    measure.warm_up()
    rows = []
    for c in configs:
        name, batch, kind = c.split(":")
        row = probe(name, int(batch), kind)
        print(f"{c}: reserved {row['reserved'] / MIB:.1f} MiB, allocated {row['allocated'] / MIB:.1f} MiB, "
              f"{sum(1 for s in row['segments'] if s['action'] == 'segment_alloc')} segments made", flush=True)
        rows.append(row)
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "runs": rows}
    with open(out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
