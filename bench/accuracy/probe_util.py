"""What the probes share: the caching allocator's block size, the transient
of one call and the JSON they write (the per-op probes: probe_sum.py,
probe_embedding.py, probe_rnn.py), and the label of a traced allocation
(the trace probes: probe_segments.py, ../distributed/probe_fsdp.py)."""
import json
import os

import torch


def block(nbytes):
    """The bytes the caching allocator counts for a request: blocks of 512."""
    return 0 if nbytes == 0 else max(512, (nbytes + 511) // 512 * 512)


def peak_above(run):
    """Runs run() on the GPU: (max_memory_allocated() during it above
    memory_allocated() before it, what run returned)."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    result = run()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before, result


def write_records(out_path, records):
    """The run's machine and versions, and one record per configuration."""
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cuda": torch.version.cuda, "records": records}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"{len(records)} configurations -> {out_path}")


def trace_label(frames, markers):
    """A traced block's label (torch.cuda.memory._record_memory_history's
    frames, innermost first): the first frame whose file name holds one of
    markers, as file:line:function; else the innermost frame's function."""
    for f in frames:
        fn = f["filename"]
        if any(k in fn for k in markers):
            return f"{os.path.basename(fn)}:{f['line']}:{f['name']}"
    return frames[0]["name"] if frames else "?"
