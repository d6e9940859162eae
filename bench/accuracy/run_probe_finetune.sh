#!/bin/bash
# The device command for probe_finetune.py: per-op probes of the fine-tuning
# cases memest misses most. Writes $OUT/probe_finetune.json and its log.
# usage (on the GPU machine, from the repo root): OUT=DIR bench/accuracy/run_probe_finetune.sh
. "$(dirname "$0")/device_env.sh"
python3 probe_finetune.py "$OUT/probe_finetune.json" \
    llama_s.lora_attn_r8:4:1024 gpt2.lora_attn_r8:4:1024 bert.lora_attn_r8:4:512 qwen2_s.lora_attn_r8:4:256 \
    llama_s.full.adafactor:8:256 llama_s.lora_attn_r8.bf16:4:1024 2>&1 | tee "$OUT/probe_finetune.log"
