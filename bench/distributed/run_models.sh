#!/bin/bash
# The device command for more models under every strategy: the models named
# (default: qwen2_4l gpt2_6l, which the first runs did not have) at world
# size 4 (hsdp in shard groups of 2), then 2 in two lanes of 2 GPUs, on one
# 4-GPU machine, one job per configuration, packed into one file.
# usage (on a 4-GPU machine, from the repo root):
#   OUT=DIR [STRATEGIES=a,b] bench/distributed/run_models.sh [MODEL ...]  -> DIR/models.tgz
# STRATEGIES: measure_dist.py's list (default: every one; hsdp only at 4).
set -u
out=$(mkdir -p "$OUT" && cd "$OUT" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
models=("$@")
[ $# -eq 0 ] && models=(qwen2_4l gpt2_6l)
rc=0
mkdir -p "$out/w4" "$out/w2"
all=${STRATEGIES:-ddp,ddp-view,zero1,fsdp,fsdp-grad-op,hsdp,tp}
OUT="$out/w4" NPROC=4 SHARD_GROUP=2 STRATEGIES=$all "$here/run_dist.sh" "${models[@]}" || rc=1
# hsdp needs more GPUs than its shard group
OUT="$out/w2" NPROC=2 STRATEGIES=$(echo "$all" | sed 's/,hsdp//; s/^hsdp,//') "$here/run_dist.sh" "${models[@]}" || rc=1
tar czf "$out/models.tgz" -C "$out" w4 w2
exit $rc
