#!/bin/bash
# The device command for issue 17's world-size-1 rows (and issue 18's
# multi-GPU ones): measure_dist.py on every GPU of the machine (one on a
# single-GPU kind), one model at a time, every strategy, batches 8 and 32.
# Results go to $OUT/dist_w<N>_<model>.json, the log to $OUT/dist_w<N>.log.
# usage (on the GPU machine, from the repo root):
#   OUT=DIR bench/distributed/run_dist.sh [MODEL ...]   (default: the four of issue 17)
. "$(dirname "$0")/../accuracy/device_env.sh"
cd ../distributed || exit 1
nvidia-smi -L
print_versions torchvision transformers
# NVLink multicast stays off (the device tool's KINDS.md)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
n=$(nvidia-smi -L | wc -l)
rc=0
for m in ${@:-resnet50 vit_b_16 bert_base llama_4l}; do
    python3 measure_dist.py "$OUT/dist_w${n}_$m.json" --nproc "$n" --models "$m" --fresh 2>&1 | grep -v Warning | tee -a "$OUT/dist_w$n.log" || rc=1
done
exit $rc
