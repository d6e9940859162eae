#!/bin/bash
# The device command for issue 17's world-size-1 rows: measure_dist.py on
# every GPU of the machine (one on a single-GPU kind) for the four models and
# every strategy, batches 8 and 32. Results go to $OUT/dist_w<N>.json, the
# log to $OUT/dist_w<N>.log.
# usage (on the GPU machine, from the repo root): OUT=DIR bench/distributed/run_dist.sh [measure_dist.py args]
. "$(dirname "$0")/../accuracy/device_env.sh"
cd "$(dirname "$0")/../distributed" 2>/dev/null || cd ../distributed
nvidia-smi -L
print_versions torchvision transformers
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
n=$(nvidia-smi -L | wc -l)
python3 measure_dist.py "$OUT/dist_w$n.json" --nproc "$n" "$@" 2>&1 | grep -v Warning | tee "$OUT/dist_w$n.log"
