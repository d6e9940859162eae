#!/usr/bin/env python3
"""Time the truth protocol's training step (Adam, float32) of zoo models on
a GPU, for memest's time estimate (docs/accuracy.md, "Step time").

usage: time_zoo.py OUT.json [MODEL ...]   (default: the TIMED list)

Per model and batch: the median of 10 timed steps (each synchronised, after
3 warm-up steps), and the PyTorch profiler's device time of one more step,
summed by op family: conv (aten::convolution and its backward, cuDNN),
matmul (aten::mm, addmm, bmm, baddbmm, scaled dot-product attention and
their backwards), other (everything else: element-wise, norms, softmax, the
optimizer's foreach kernels), with the number of kernels. The top level
has `launch_s`: the time of one tiny op (an add of two 1-element tensors)
in a loop of 2000, synchronised once: eager PyTorch's per-op floor; and
`eager`: the host's cost per forward op, per backward op and per parameter
of Adam's step, from a chain of 200 Linear(8, 8) + ReLU at batch 1, where
the GPU waits on the host (eager_probe).
cudnn.benchmark is left off, TF32 as PyTorch defaults (convolutions on,
matmuls off).
"""
import json
import os
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402
from time_step import protocol_step, timed_steps  # noqa: E402

TIMED = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "convnext_tiny", "densenet121", "vgg11_bn",
         "vit_b_16", "swin_t", "bert_base", "gpt2_6l", "llama_4l"]
BATCHES = [8, 32]
CONV = ("convolution", "cudnn_convolution", "conv2d", "conv1d")
MATMUL = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "scaled_dot_product", "flash_attention",
          "efficient_attention", "aten::matmul", "aten::linear")


def family(name):
    if any(c in name for c in CONV):
        return "conv"
    if any(name.startswith(m) or m in name for m in MATMUL):
        return "matmul"
    return "other"


def launch_floor():
    a = torch.ones(1, device="cuda")
    for _ in range(100):
        a = a + 1
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(2000):
        a = a + 1
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / 2000


def eager_probe(layers=200, repeat=20):
    """Eager PyTorch's host cost per op, where the GPU is idle: a chain of
    `layers` Linear(8, 8) + ReLU at batch 1, Adam. Seconds per forward op
    (2 a layer), per backward op, and per parameter in the optimizer step,
    each the median of `repeat` synchronised runs."""
    model = torch.nn.Sequential(*[m for _ in range(layers) for m in (torch.nn.Linear(8, 8), torch.nn.ReLU())]).cuda()
    x = torch.randn(1, 8, device="cuda")
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    fwd, bwd, step = [], [], []
    for i in range(repeat + 3):
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        y = model(x)
        loss = y.float().mean()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        loss.backward()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        opt.step()
        torch.cuda.synchronize()
        t3 = time.perf_counter()
        if i >= 3:
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
            step.append(t3 - t2)
    n_ops, n_params = 2 * layers, 2 * layers
    return {"layers": layers, "forward_op_s": statistics.median(fwd) / n_ops,
            "backward_op_s": statistics.median(bwd) / n_ops, "optimizer_param_s": statistics.median(step) / n_params,
            "forward_s": statistics.median(fwd), "backward_s": statistics.median(bwd),
            "optimizer_s": statistics.median(step)}


def time_model(name, batch):
    model = zoo.build(name).cuda().train()
    x = zoo.make_input(name, batch).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    step = protocol_step(model, x, opt)
    times = timed_steps(step, warm=3, timed=10)
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        step()
        torch.cuda.synchronize()
    fam = {"conv": 0.0, "matmul": 0.0, "other": 0.0}
    kernels = 0
    for ev in prof.key_averages():
        self_dev = getattr(ev, "self_device_time_total", None)
        if self_dev is None:
            self_dev = getattr(ev, "self_cuda_time_total", 0)
        if ev.key.startswith("aten::") or ev.key.startswith("cudnn") or ev.key.startswith("aten"):
            fam[family(ev.key)] += self_dev / 1e6
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            kernels += 1
    del model, x, opt
    torch.cuda.empty_cache()
    return {"step_s": statistics.median(times), "steps_s": times, "device_s": fam,
            "device_total_s": sum(fam.values()), "kernels": kernels}


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or TIMED
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
           "date": time.strftime("%Y-%m-%d"), "launch_s": launch_floor(), "eager": eager_probe(), "models": {}}
    e = res["eager"]
    print(f"{res['device']}: one tiny op {res['launch_s'] * 1e6:.1f} us; eager forward op "
          f"{e['forward_op_s'] * 1e6:.1f} us, backward op {e['backward_op_s'] * 1e6:.1f} us, Adam per parameter "
          f"{e['optimizer_param_s'] * 1e6:.2f} us", flush=True)
    for name in names:
        res["models"][name] = {}
        for b in BATCHES:
            try:
                r = time_model(name, b)
            except Exception as e:  # recorded; the others still run
                r = {"error": repr(e)[:300]}
            res["models"][name][str(b)] = r
            if "error" in r:
                print(f"{name:16} b{b:<3} ERROR {r['error'][:100]}", flush=True)
            else:
                d = r["device_s"]
                print(f"{name:16} b{b:<3} step {r['step_s'] * 1e3:8.2f} ms  device conv {d['conv'] * 1e3:7.2f} "
                      f"matmul {d['matmul'] * 1e3:7.2f} other {d['other'] * 1e3:7.2f} ms  {r['kernels']} kernels",
                      flush=True)
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
