#!/usr/bin/env python3
"""What PyTorch's cuDNN recurrent layers allocate: the evidence for the LSTM,
GRU and RNN rules of layers/recurrent.c.

usage (on a GPU machine): probe_rnn.py OUT.json [axes | large]

For every configuration of a grid (mode LSTM / GRU / RNN_TANH, seq T, batch
N, input I, hidden H, layers L, one or two directions D, float32 and
bfloat16), one nn.LSTM / nn.GRU / nn.RNN (time-major input, flattened
weights, as nn.Module.cuda() leaves them) runs:

  train forward   x (T, N, I) without grad, the module's parameters with:
                  after = memory_allocated() once the outputs exist;
                  kept = after - before - bytes(y, h_n[, c_n]) is what the
                  forward left besides its outputs (cuDNN's reserve space,
                  saved for backward; any weight copy would show here too);
                  fwd_transient = max_memory_allocated() - after
  backward        y.sum() + h_n.sum() [+ c_n.sum()], backward: the peak over
                  the level before it, minus the parameters' gradients
                  (bwd_transient), and what is left besides those gradients
  inference       the same forward under torch.no_grad(): infer_transient
                  and what it left besides its outputs (infer_kept); the
                  module still in training mode, so cuDNN makes its reserve
  eval            the same after module.eval(), as an inference pass runs:
                  eval_transient and eval_kept

With `axes`, the grid is axes_grid()'s instead: one size at a time over
wide ranges, and the zoo's own recurrent calls; with `large`, the zoo's
calls at large batches (large_grid()).

Every figure is in bytes as the caching allocator counts them (blocks of
512). The JSON has the machine, torch and cuDNN versions, and one record per
configuration. docs/memory-model.md ("Recurrent layers") fits the rules to
it; bench/accuracy/data/rnn/ keeps the runs.
"""
import itertools
import json
import sys

import torch

from probe_util import block


def tensor_bytes(t):
    return block(t.numel() * t.element_size())


def settle():
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def make(mode, inp, hidden, layers, bidir, dtype):
    cls = {"LSTM": torch.nn.LSTM, "GRU": torch.nn.GRU, "RNN_TANH": torch.nn.RNN}[mode]
    m = cls(inp, hidden, num_layers=layers, bidirectional=bidir)
    return m.to(device="cuda", dtype=dtype)


def outputs_of(mode, out):
    y, h = out
    return [y, *h] if mode == "LSTM" else [y, h]


def forward(mode, m, x, grad):
    """The outputs of one forward from a settled allocator, what the forward
    left beyond them and its transient above what it left: (outputs, out
    bytes, kept, transient)."""
    settle()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with torch.set_grad_enabled(grad):
        outs = outputs_of(mode, m(x))
    torch.cuda.synchronize()
    after = torch.cuda.memory_allocated()
    out_bytes = sum(tensor_bytes(t) for t in outs)
    return outs, out_bytes, after - before - out_bytes, torch.cuda.max_memory_allocated() - after


def probe(mode, T, N, inp, hidden, layers, bidir, dtype):
    m = make(mode, inp, hidden, layers, bidir, dtype)
    x = torch.randn(T, N, inp, device="cuda", dtype=dtype)
    param_bytes = sum(tensor_bytes(p) for p in m.parameters())
    rec = {"mode": mode, "T": T, "N": N, "I": inp, "H": hidden, "L": layers, "D": 2 if bidir else 1,
           "dtype": str(dtype).replace("torch.", ""), "param_bytes": param_bytes}
    # inference in training mode, then in eval mode (as an inference pass
    # runs it: no reserve), then the training forward
    outs, rec["out_bytes"], rec["infer_kept"], rec["infer_transient"] = forward(mode, m, x, False)
    del outs
    m.eval()
    outs, _, rec["eval_kept"], rec["eval_transient"] = forward(mode, m, x, False)
    del outs
    m.train()
    outs, _, rec["kept"], rec["fwd_transient"] = forward(mode, m, x, True)
    # backward
    loss = sum(t.float().sum() for t in outs)
    torch.cuda.synchronize()
    level = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    loss.backward()
    torch.cuda.synchronize()
    grad_bytes = sum(tensor_bytes(p.grad) for p in m.parameters() if p.grad is not None)
    rec["grad_bytes"] = grad_bytes
    rec["bwd_transient"] = torch.cuda.max_memory_allocated() - level - grad_bytes
    rec["bwd_left"] = torch.cuda.memory_allocated() - level - grad_bytes
    del outs, loss, m, x
    return rec


def axes_grid():
    """One size at a time from a base call (T 64, N 32, I 256, H 512, one
    layer, one direction), over wide ranges, plus the zoo's recurrent calls
    (lstm_tagger, gru_kws and char_rnn at batches 1, 8 and 64)."""
    grid = []
    for mode in ["LSTM", "GRU", "RNN_TANH"]:
        base = dict(T=64, N=32, I=256, H=512, L=1, D=False)
        axes = {"T": [16, 256, 1024], "N": [1, 8, 128, 512], "H": [64, 256, 1024, 2048], "I": [32, 1024],
                "L": [2, 3, 4], "D": [True]}
        configs = [dict(base)]
        for axis, values in axes.items():
            for v in values:
                configs.append(dict(base, **{axis: v}))
        for c in configs:
            grid.append((mode, c["T"], c["N"], c["I"], c["H"], c["L"], c["D"], torch.float32))
    for n in [1, 8, 64]:
        grid.append(("LSTM", 64, n, 128, 256, 2, True, torch.float32))
        grid.append(("GRU", 100, n, 80, 384, 2, False, torch.float32))
        grid.append(("RNN_TANH", 256, n, 64, 512, 3, False, torch.float32))
    return grid


def large_grid():
    """The zoo's recurrent calls at large batches, where --max-batch looks."""
    grid = []
    for n in [512, 2048, 8192]:
        grid.append(("LSTM", 64, n, 128, 256, 2, True, torch.float32))
        grid.append(("GRU", 100, n, 80, 384, 2, False, torch.float32))
    for n in [256, 1024]:
        grid.append(("RNN_TANH", 256, n, 64, 512, 3, False, torch.float32))
    return grid


def main():
    out_path = sys.argv[1]
    torch.backends.cudnn.benchmark = False
    grids = {"axes": axes_grid, "large": large_grid}
    if len(sys.argv) > 2 and sys.argv[2] in grids:
        run(out_path, grids[sys.argv[2]]())
        return
    grid = []
    for mode in ["LSTM", "GRU", "RNN_TANH"]:
        for T, N, inp, hidden, layers, bidir in itertools.product([8, 64], [4, 32], [64], [128, 512], [1, 2],
                                                                    [False, True]):
            grid.append((mode, T, N, inp, hidden, layers, bidir, torch.float32))
        # input size, a long sequence, a large batch, and bfloat16
        grid.append((mode, 32, 16, 1024, 256, 1, False, torch.float32))
        grid.append((mode, 512, 8, 64, 256, 1, False, torch.float32))
        grid.append((mode, 16, 256, 64, 256, 2, True, torch.float32))
        grid.append((mode, 64, 32, 64, 512, 2, True, torch.bfloat16))
        grid.append((mode, 8, 4, 64, 128, 1, False, torch.bfloat16))
    run(out_path, grid)


def run(out_path, grid):
    records = []
    for cfg in grid:
        try:
            records.append(probe(*cfg))
        except Exception as e:  # one failure must not lose the rest
            records.append({"config": [str(c) for c in cfg], "error": f"{type(e).__name__}: {e}"})
        print(json.dumps(records[-1]), flush=True)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "records": records}
    with open(out_path, "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main()
