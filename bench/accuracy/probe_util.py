"""What the per-op probes (probe_sum.py, probe_embedding.py, probe_rnn.py)
share: the caching allocator's block size, the transient of one call, and
the JSON they write."""
import json

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
