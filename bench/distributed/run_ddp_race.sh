#!/bin/bash
# The device command for a second sample of DDP's first-bucket race
# (docs/accuracy.md, "DDP's first bucket"): the DDP family (ddp, ddp-view,
# zero1) of the four models at batches 8 and 32, one job per configuration,
# at world sizes 4, 2 and 1 on one 4-GPU machine (lanes of 4, 2 and 1 GPUs
# side by side: run_dist.sh), then everything packed into one file.
# usage (on a 4-GPU machine, from the repo root):
#   OUT=DIR bench/distributed/run_ddp_race.sh      -> DIR/race.tgz
set -u
out=$(mkdir -p "$OUT" && cd "$OUT" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
rc=0
for n in 4 2 1; do
    mkdir -p "$out/w$n"
    OUT="$out/w$n" NPROC=$n STRATEGIES=ddp,ddp-view,zero1 "$here/run_dist.sh" || rc=1
done
tar czf "$out/race.tgz" -C "$out" w4 w2 w1
exit $rc
