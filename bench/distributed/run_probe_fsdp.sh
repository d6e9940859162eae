#!/bin/bash
# The device command for probe_fsdp.py: the caching allocator's trace of one
# FSDP2 step on rank 0 of 2 GPUs, per model and strategy, into one file.
# usage (on a machine with 2 or more GPUs, from the repo root):
#   OUT=DIR bench/distributed/run_probe_fsdp.sh [MODELS]   -> DIR/probe_fsdp.json
. "$(dirname "$0")/dist_env.sh"
CUDA_VISIBLE_DEVICES=0,1 python3 probe_fsdp.py "$OUT/probe_fsdp.json" --nproc 2 \
    --models "${1:-bert_base,qwen2_4l,llama_4l,vit_b_16}" 2>&1 | grep -v Warning
