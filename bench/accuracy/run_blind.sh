#!/bin/bash
# The device command for a blind check: a conv workspace sweep (SWEEP,
# probe_wgrad.py unless named: probe_NAME.py writes NAME.json) and the truth
# protocol with MemTracker and per-op probes for the models named
# (measure.py). Results and logs go to $OUT: NAME.json, measured_blind.json,
# probe/<model>.json, *.log.
# usage (on the GPU machine, from the repo root):
#   OUT=DIR [SWEEP=probe_splitk.py] bench/accuracy/run_blind.sh MODEL [MODEL ...]
. "$(dirname "$0")/device_env.sh"
mkdir -p "$OUT/probe"
python3 -c 'import torch, transformers; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version(), "transformers", transformers.__version__)'
rc=0
t0=$(date +%s)
SWEEP=${SWEEP:-probe_wgrad.py}
name=${SWEEP#probe_}
name=${name%.py}
python3 "$SWEEP" "$OUT/$name.json" > "$OUT/$name.log" 2>&1 || rc=1
t1=$(date +%s)
echo "$SWEEP: $((t1 - t0)) s"
python3 measure.py "$OUT/measured_blind.json" --probe "$OUT/probe" "$@" 2>&1 | tee "$OUT/measure_blind.log" || rc=1
t2=$(date +%s)
echo "measure.py: $((t2 - t1)) s"
exit $rc
