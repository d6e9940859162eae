#!/bin/sh
# gpu_half.sh: on a GPU machine, `memest verify --dtype bfloat16 / float16`
# beside float32, on staged models (scripts/stage_gpu.sh):
#   1. every model (MODELS), dtype (DTYPES, default "float32 bfloat16
#      float16"; amp-bf16 and amp-fp16 run --amp instead of --dtype) and run (RUNS, mode:optimizer pairs, default "train:adam
#      infer:-") at BATCH (default 8): the estimate's peak, the measured one
#      and their error into OUT/half.tsv, one JSON per run in OUT/json/;
#   2. inference runs dump their graph outputs; each half run's are compared
#      with the float32 run's (scripts/compare_half.py, relative tolerance
#      RTOL, default 0.05): OUT/outputs.tsv;
#   3. with BASE_MODULE (an older build of the verify module), the float32
#      runs again on it: its peaks and outputs beside this build's
#      (OUT/base.tsv; outputs bit-identical when the float32 kernels are).
#
# usage: scripts/gpu_half.sh STAGE OUT
#   STAGE  the staged folder (STAGE/build/cli/memest, STAGE/build/deps);
#          MODELS defaults to STAGE/truth/*.legacy-train.onnx and
#          STAGE/models/*.onnx; RUN_TIMEOUT (default 120) bounds each run, in
#          seconds; FLAGS adds flags to every run (e.g. "--trainable fc."),
#          whose files are named with TAG (default none); TRACE=1 writes
#          each run's allocations to OUT/trace/ (MEMEST_VERIFY_TRACE).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
stage=$1 out=$2
mkdir -p "$out/json" "$out/dump"
export LD_LIBRARY_PATH="$stage/build/deps:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
memest=$stage/build/cli/memest
module=${MEMEST_VERIFY_MODULE:-$stage/build/verify/libmemest_verify.so}
models=${MODELS:-$(ls "$stage"/truth/*.legacy-train.onnx "$stage"/models/*.onnx 2>/dev/null)}
batch=${BATCH:-8}
rtol=${RTOL:-0.05}

peak_row() { # json -> estimate measured error
    python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); p=d["peak"]
e=p.get("error")
print("%d\t%d\t%s\t%s\t%s" % (p["estimate"], p["measured"], "-" if e is None else "%+.4f%%" % (100*e), p["estimate_phase"], p["measured_phase"]))' "$1" 2>/dev/null || printf -- '-\t-\t-\t-\t-\n'
}

printf 'model\tdtype\tmode\tbatch\testimate\tmeasured\terror\test_phase\tmeas_phase\trc\tmessage\n' >"$out/half.tsv"
printf 'model\tdtype\toutput\tshape\tmax_abs_diff\tref_max_abs\trel\tidentical\tresult\n' >"$out/outputs.tsv"
printf 'model\tmode\tbase_measured\tmeasured\tsame_peak\toutputs\n' >"$out/base.tsv"
for m in $models; do
    name=$(basename "$m" .onnx)
    for run in ${RUNS:-train:adam infer:-}; do
        mode=${run%%:*} opt=${run#*:}
        optflag="" rn=$mode
        [ "$opt" != - ] && optflag="--optimizer $opt" rn=$mode-$opt
        for dt in ${DTYPES:-float32 bfloat16 float16}; do
            tag=$name.$rn.$dt.b$batch${TAG:+.$TAG}
            dump=""
            [ "$mode" = infer ] && dump="--dump-outputs $out/dump/$tag"
            case $dt in amp-*) dtflag="--amp ${dt#amp-}" ;; *) dtflag="--dtype $dt" ;; esac
            trace=""
            [ -n "${TRACE:-}" ] && mkdir -p "$out/trace" && trace=$out/trace/$tag.tsv
            MEMEST_VERIFY_TRACE=$trace MEMEST_VERIFY_MODULE=$module timeout "${RUN_TIMEOUT:-120}" "$memest" verify "$m" --batch "$batch" --mode "$mode" $optflag $dtflag \
                ${FLAGS:-} --format json -o "$out/json/$tag.json" $dump >"$out/json/$tag.log" 2>&1
            rc=$?
            msg=$(grep -m1 'memest:' "$out/json/$tag.log" | tr '\t' ' ' | cut -c1-160)
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$dt" "$rn${TAG:+ $TAG}" "$batch" "$(peak_row "$out/json/$tag.json")" "$rc" \
                "${msg:--}" >>"$out/half.tsv"
            if [ "$mode" = infer ] && [ "$dt" != float32 ] && [ -f "$out/dump/$tag/outputs.json" ]; then
                python3 "$here/scripts/compare_half.py" "$out/dump/$name.infer.float32.b$batch${TAG:+.$TAG}" "$out/dump/$tag" \
                    --rtol "$rtol" | sed "s/^/$name\t$dt\t/" >>"$out/outputs.tsv"
            fi
        done
        if [ -n "${BASE_MODULE:-}" ]; then
            tag=$name.$rn.float32.b$batch${TAG:+.$TAG}
            dump=""
            [ "$mode" = infer ] && dump="--dump-outputs $out/dump/$tag.base"
            MEMEST_VERIFY_MODULE=$BASE_MODULE timeout "${RUN_TIMEOUT:-120}" "$memest" verify "$m" --batch "$batch" --mode "$mode" $optflag \
                ${FLAGS:-} --format json -o "$out/json/$tag.base.json" $dump >"$out/json/$tag.base.log" 2>&1
            b=$(peak_row "$out/json/$tag.base.json" | cut -f2) n=$(peak_row "$out/json/$tag.json" | cut -f2)
            same=$([ "$b" = "$n" ] && echo yes || echo no)
            outs=-
            if [ "$mode" = infer ]; then
                if python3 "$here/scripts/compare_half.py" "$out/dump/$tag.base" "$out/dump/$tag" --identical \
                    >"$out/json/$tag.base.cmp" 2>&1; then
                    outs=bit-identical
                else
                    outs=differ
                fi
            fi
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$rn${TAG:+ $TAG}" "$b" "$n" "$same" "$outs" >>"$out/base.tsv"
        fi
    done
done
cat "$out/half.tsv"
echo
cat "$out/outputs.tsv"
echo
cat "$out/base.tsv"
