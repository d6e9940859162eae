#!/bin/bash
# The device command for capacity and checkpointing: every zoo model with the
# truth protocol (infer, train, train_amp_bf16/fp16, each with the caching
# allocator's reserved bytes; no MemTracker, no probes), then the
# torch.utils.checkpoint cases of measure_checkpoint.py. Results and logs go
# to $OUT: measured_cap.json, measure_cap.log, checkpoint.json, checkpoint.log.
# usage (on the GPU machine, from the repo root): OUT=DIR bench/accuracy/run_capacity.sh
# Takes about 4 minutes on an H100/H200 (under 8).
. "$(dirname "$0")/device_env.sh"
nvidia-smi -L
print_versions torchvision transformers onnx
rc=0
t0=$(date +%s)
python3 measure.py "$OUT/measured_cap.json" --no-memtracker 2>&1 | tee "$OUT/measure_cap.log" || rc=1
t1=$(date +%s)
echo "measure.py: $((t1 - t0)) s" | tee -a "$OUT/measure_cap.log"
python3 measure_checkpoint.py "$OUT/checkpoint.json" 2>&1 | tee "$OUT/checkpoint.log" || rc=1
t2=$(date +%s)
echo "measure_checkpoint.py: $((t2 - t1)) s; total $((t2 - t0)) s" | tee -a "$OUT/checkpoint.log"
exit $rc
