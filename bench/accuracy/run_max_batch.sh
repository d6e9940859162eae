#!/bin/bash
# The device command for the true largest batches (max_batch.py), started
# from memest's --max-batch answers for the GPU it runs on.
# usage (on the GPU machine, from the repo root): OUT=DIR bench/accuracy/run_max_batch.sh NAME MODEL:START ...
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
OUT=${OUT:-out}
name=$1
shift
nvidia-smi -L
python3 max_batch.py "$OUT/max_batch_$name.json" --limit 60 "$@" > "$OUT/max_batch_$name.log" 2>&1
status=$?
grep -E "out of memory|ran" "$OUT/max_batch_$name.log" | tail -4
exit $status
