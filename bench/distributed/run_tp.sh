#!/bin/bash
# The device command for tensor parallelism on every model TP_PLANS has
# (measure_dist.py): --strategies tp at world sizes 4 and 2 (two lanes of
# 2 GPUs) on one 4-GPU machine, one job per configuration, packed into one
# file.
# usage (on a 4-GPU machine, from the repo root):
#   OUT=DIR bench/distributed/run_tp.sh      -> DIR/tp.tgz
set -u
out=$(mkdir -p "$OUT" && cd "$OUT" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
rc=0
for n in 4 2; do
    mkdir -p "$out/w$n"
    OUT="$out/w$n" NPROC=$n STRATEGIES=tp "$here/run_dist.sh" bert_base qwen2_4l llama_4l || rc=1
done
tar czf "$out/tp.tgz" -C "$out" w4 w2
exit $rc
