#!/bin/bash
# The device command for a few zoo models: the truth protocol and the per-op
# probe (measure.py), results to $OUT/measured_<NAME>.json, the probe to
# $OUT/probe_<NAME>.tar.gz and the log to $OUT/measure_<NAME>.log.
# usage (on the GPU machine, from the repo root): bench/accuracy/run_models.sh NAME MODEL ...
set -o pipefail
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
OUT=${OUT:-out}
name=$1
shift
rm -rf /tmp/probe
python3 measure.py "$OUT/measured_$name.json" --probe /tmp/probe "$@" > "$OUT/measure_$name.log" 2>&1
status=$?
tail -3 "$OUT/measure_$name.log"
tar czf "$OUT/probe_$name.tar.gz" -C /tmp probe
exit $status
