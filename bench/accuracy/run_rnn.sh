#!/bin/bash
# The device command for the recurrent family: cuDNN's reserve space and
# workspaces over a grid (probe_rnn.py), then the truth protocol and the
# per-op probe on the recurrent zoo models. Results go to $OUT.
# usage (on the GPU machine, from the repo root): bench/accuracy/run_rnn.sh
set -o pipefail
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
OUT=${OUT:-out}
nvidia-smi -L
python3 probe_rnn.py "$OUT/rnn_probe.json" > "$OUT/rnn_probe.log" 2>&1
tail -2 "$OUT/rnn_probe.log"
python3 measure.py "$OUT/measured_rnn.json" --probe /tmp/probe lstm_tagger gru_kws char_rnn 2>&1 | tee "$OUT/measure_rnn.log" | tail -5
tar czf "$OUT/probe_rnn.tar.gz" -C /tmp probe
