#!/bin/bash
# The device command for fine-tuning (issue 14): every case of finetune_zoo.py
# with the truth protocol (measure_finetune.py): LoRA/DoRA on three decoders
# and BERT, resnet50 with a frozen backbone, Adafactor, gradient accumulation,
# bf16, and last the Llama-3-8B-shaped model with LoRA in bf16, with and without
# gradient checkpointing. Results and log go to $OUT: finetune.json,
# finetune.log. Extra arguments go to measure_finetune.py (--only ID,...,
# --small-budget S, --deadline S).
# usage (on the GPU machine, from the repo root): OUT=DIR bench/accuracy/run_finetune.sh
# The rows before the 8B stop at 380 s and every row at 505 s (measure_finetune.py's
# defaults), so the whole command ends within 9 minutes on an H100.
. "$(dirname "$0")/device_env.sh"
export PYTHONWARNINGS=ignore TRANSFORMERS_VERBOSITY=error HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
print_versions transformers peft torchvision onnx
rc=0
t0=$(date +%s)
python3 measure_finetune.py "$OUT/finetune.json" "$@" 2>&1 | tee "$OUT/finetune.log" || rc=1
t1=$(date +%s)
echo "measure_finetune.py: $((t1 - t0)) s" | tee -a "$OUT/finetune.log"
exit $rc
