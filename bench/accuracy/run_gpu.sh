#!/bin/bash
# The device command of the accuracy harness: measure every zoo model with the
# truth protocol, probe per-op memory, sweep conv workspaces. Results go to
# $OUT (measured.json, probe.tar.gz, conv.json, log).
# usage (on the GPU machine, from the repo root): bench/accuracy/run_gpu.sh [MODEL ...]
set -o pipefail
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
OUT=${OUT:-out}
nvidia-smi -L
python3 -c 'import torch; print(torch.__version__, torch.backends.cudnn.version())'
python3 probe_conv.py "$OUT/conv.json" 2>&1 | tee "$OUT/conv.log"
python3 measure.py "$OUT/measured.json" --probe /tmp/probe "$@" 2>&1 | tee "$OUT/measure.log"
tar czf "$OUT/probe.tar.gz" -C /tmp probe
