#!/bin/bash
# The device command for issue 17's world-size-1 rows and issue 18's
# multi-GPU ones: measure_dist.py --fresh (one job per configuration), one
# model at a time, batches 8 and 32.
# Results go to $OUT/dist_w<N>_<model>.json, the logs to $OUT/dist_w<N>_lane<L>.log.
# usage (on the GPU machine, from the repo root):
#   OUT=DIR [NPROC=N] [STRATEGIES=a,b] [SHARD_GROUP=G] bench/distributed/run_dist.sh [MODEL ...]
# NPROC: GPUs per job (default: all of them). Where the machine has more,
# the models are dealt to lanes of NPROC GPUs each (CUDA_VISIBLE_DEVICES),
# whose jobs run side by side: each job's figures are its own GPUs'.
# STRATEGIES: measure_dist.py's list (default: all). SHARD_GROUP: hsdp's.
. "$(dirname "$0")/dist_env.sh"
gpus=$(nvidia-smi -L | wc -l)
n=${NPROC:-$gpus}
lanes=$((gpus / n))
extra=()
[ -n "${STRATEGIES:-}" ] && extra+=(--strategies "$STRATEGIES")
[ -n "${SHARD_GROUP:-}" ] && extra+=(--shard-group "$SHARD_GROUP")
models=(${@:-resnet50 vit_b_16 bert_base llama_4l})
lane_run() { # lane_run LANE MODEL...
    local lane=$1 rc=0
    shift
    local devs
    devs=$(seq -s, $((lane * n)) $((lane * n + n - 1)))
    for m in "$@"; do
        CUDA_VISIBLE_DEVICES=$devs python3 measure_dist.py "$OUT/dist_w${n}_$m.json" --nproc "$n" --models "$m" \
            --fresh "${extra[@]}" 2>&1 | grep -v Warning | tee -a "$OUT/dist_w${n}_lane$lane.log" || rc=1
    done
    return $rc
}
pids=()
for ((l = 0; l < lanes; l++)); do
    mine=()
    for ((i = l; i < ${#models[@]}; i += lanes)); do mine+=("${models[i]}"); done
    [ ${#mine[@]} -gt 0 ] && { lane_run "$l" "${mine[@]}" & pids+=($!); }
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
