#!/bin/sh
# gpu_zoo_verify.sh: on a GPU machine, from the repository root, with a
# folder scripts/stage_gpu.sh made (STAGE, default .gpu): the kernel tests,
# then `memest verify` over the staged models (scripts/gpu_verify.sh's
# sweep), then the fine-tuning runs, each part's results packed into one
# archive under $OUT (the device tool brings back few files).
#   OUT=DIR [STAGE=.gpu] [BATCHES="8"] [RUNS="train:adam infer:-"] [PARTS="tests sweep finetune"] \
#       [TIMED="resnet18,vit_b_16,..."] [MODELS="FILE.onnx ..."] scripts/gpu_zoo_verify.sh
# MODELS: the sweep's models (default: every staged one).
# PARTS may also name "torch": PyTorch's eager step time of the TIMED zoo
# models at BATCHES, Adam (bench/accuracy/time_step.py), on the same GPU as
# the sweep, for docs/verify.md's step-time ratio.
# Fine-tuning runs (docs/verify.md): resnet18 with its head alone training
# (--trainable fc.), the LoRA block with its adapters alone (--trainable
# lora_), bert_base with its embeddings frozen (--freeze embeddings).
set -u
stage=${STAGE:-.gpu}
out=${OUT:?OUT is where results go}
parts=${PARTS:-tests sweep finetune}
mkdir -p "$out"
build=$stage/build
export LD_LIBRARY_PATH="$build/deps:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MEMEST_VERIFY_MODULE=$build/verify/libmemest_verify.so
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
status=0
case " $parts " in *" tests "*)
    for t in test_grad test_grad_elementwise; do
        "$build/tests/gpu/$t" >"$out/$t.log" 2>&1
        rc=$?
        echo "$t: exit $rc, $(grep -c '^FAIL' "$out/$t.log") failing lines; $(tail -1 "$out/$t.log")"
        [ $rc -ne 0 ] && status=1
    done
    "$build/tests/gpu/test_verify_models" "$stage/truth" >"$out/verify-models.log" 2>&1 || status=1
    tail -3 "$out/verify-models.log"
    ;;
esac
case " $parts " in *" sweep "*)
    SKIP_TESTS=1 SKIP_CONFORMANCE=1 SKIP_ORT=1 TRUTH=$stage/truth BATCHES=${BATCHES:-8} \
        RUNS=${RUNS:-"train:adam infer:-"} MODELS="${MODELS:-$(ls "$stage"/models/*.onnx)}" \
        sh scripts/gpu_verify.sh "$build" "$out/sweep" >"$out/sweep.log" 2>&1 || status=1
    grep -c "	ok$" "$out/sweep/sweep.tsv" | sed 's/^/runs ok: /'
    grep -v "	ok$" "$out/sweep/sweep.tsv" | cut -c1-220
    tar czf "$out/sweep.tgz" -C "$out" sweep && rm -rf "$out/sweep"
    ;;
esac
case " $parts " in *" finetune "*)
    memest=$build/cli/memest
    : >"$out/finetune.log"
    for spec in "$stage/truth/resnet18.legacy-train.onnx|--trainable fc." "models/lora_block.json|--trainable lora_" \
                "$stage/truth/bert_base.legacy-train.onnx|--freeze embeddings"; do
        f=${spec%%|*} flags=${spec#*|}
        [ -e "$f" ] || continue
        for b in ${BATCHES:-8}; do
            echo "== $(basename "$f") $flags --batch $b" >>"$out/finetune.log"
            "$memest" verify "$f" --batch "$b" $flags --tolerance 100000 >>"$out/finetune.log" 2>&1 || status=1
            "$memest" verify "$f" --batch "$b" $flags --format json --tolerance 100000 \
                >"$out/finetune.$(basename "$f" .onnx).b$b.json" 2>>"$out/finetune.log"
        done
    done
    grep -E "^==|^ *peak|PEAK|error" "$out/finetune.log" | head -40
    tar czf "$out/finetune.tgz" -C "$out" $(cd "$out" && ls finetune.*.json 2>/dev/null) && rm -f "$out"/finetune.*.json
    ;;
esac
case " $parts " in *" torch "*)
    b=$(echo "${BATCHES:-8}" | tr ' ' ',')
    PYTHONUNBUFFERED=1 python3 bench/accuracy/time_step.py "${TIMED:?TIMED names the models to time}" "$b" adam \
        >"$out/torch_steps.jsonl" 2>"$out/torch_steps.err" || status=1
    wc -l <"$out/torch_steps.jsonl" | sed 's/$/ PyTorch step times/'
    ;;
esac
exit $status
