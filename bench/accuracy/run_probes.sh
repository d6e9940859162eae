#!/bin/bash
# The device command for a second blind set plus per-op probes of models
# already measured: measure.py with MemTracker and probes on the models of
# BLIND (written to $OUT/measured_blind2.json, probes in blind2_probe.tar.gz),
# then probes only (the protocol again, to /tmp) of the models of PROBE
# (probe.tar.gz). Tarred because the device returns a limited number of files.
# usage (on the GPU machine, from the repo root):
#   OUT=DIR BLIND="m1 m2" PROBE="m3 m4" bench/accuracy/run_probes.sh
. "$(dirname "$0")/device_env.sh"
rc=0
if [ -n "$BLIND" ]; then
    # shellcheck disable=SC2086
    python3 measure.py "$OUT/measured_blind2.json" --probe /tmp/blind2_probe $BLIND 2>&1 | grep -v Warning \
        | tee "$OUT/measure_blind2.log" || rc=1
    tar czf "$OUT/blind2_probe.tar.gz" -C /tmp blind2_probe
fi
if [ -n "$PROBE" ]; then
    # shellcheck disable=SC2086
    python3 measure.py /tmp/probe_only.json --probe /tmp/probe $PROBE 2>&1 | grep -v Warning \
        | tee "$OUT/measure_probe.log" || rc=1
    tar czf "$OUT/probe.tar.gz" -C /tmp probe
fi
exit $rc
