#!/bin/bash
# same_output.sh OLD_MEMEST NEW_MEMEST [EXPORTS_DIR]
#
# Runs the same commands with two memest builds and diffs what they print:
# the check that a change meant for speed or structure leaves every output
# byte-identical. Covers training and inference (JSON, table, CSV), the
# capacity search and sweeps, strategies, tensor parallelism, autocast,
# checkpointing, fine-tuning and verify's kernels, over both exporters.
# Prints one line per differing command and exits 1 when any differs.
set -u -f  # -f: the commands' globs are memest's, not the shell's
old=$1 new=$2
dir=${3:-bench/accuracy/out/exports}
models="resnet50 swin_t bert_base llama_4l gpt2_6l vit_b_16 mobilenet_v2 lstm_tagger t5_encdec densenet121 convnext_tiny qwen2_4l"
cmds=(
  "--batch 8 --format json"
  "--batch 8 --mode infer --format json"
  "--batch 4 --top 5 --depth 2"
  "--batch 4 --format csv"
  "--max-batch --gpu H100-80GB"
  "--sweep batch=1,2,4,8 --format json"
  "--batch 8 --amp bf16 --format json"
  "--batch 8 --world-size 4 --strategy ddp --format json"
  "--batch 8 --world-size 4 --strategy fsdp --format json"
  "--batch 8 --world-size 2 --strategy zero1 --rank 1 --format json"
  "--batch 8 --kernels verify --format json"
  "--batch 8 --optimizer sgd --checkpoint every=1 --format json"
  "--batch 8 --trainable *1* --format json"
  "--batch 8 --world-size 2 --tp 2 --format json"
)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ndiff=0 nrun=0
for m in $models; do
  for f in "$dir/$m.legacy-train.onnx" "$dir/$m.dynamo-train.onnx"; do
    [ -f "$f" ] || continue
    for c in "${cmds[@]}"; do
      # shellcheck disable=SC2086
      "$old" "$f" $c >"$tmp/a" 2>&1; ra=$?
      # shellcheck disable=SC2086
      "$new" "$f" $c >"$tmp/b" 2>&1; rb=$?
      nrun=$((nrun + 1))
      if [ $ra != $rb ] || ! cmp -s "$tmp/a" "$tmp/b"; then
        echo "DIFFERS: $f $c (exit $ra vs $rb)"; ndiff=$((ndiff + 1))
      fi
    done
  done
done
echo "$nrun commands, $ndiff differ"
[ $ndiff = 0 ]
