#!/bin/sh
# gpu_verify.sh: on a GPU machine, run the verify executor's evidence:
#   1. the meson 'gpu' test suite (kernel gradients, the truth models);
#   2. a sweep of `memest verify` over every model in the truth folder
#      (legacy-train exports; MODELS names other files), batches 8 and 32,
#      sgd / momentum / adam and infer (RUNS), written as a table (TSV) and
#      the raw JSON per run;
#   3. forward conformance against the ONNX node tests
#      (tests/gpu/test_verify_conformance: OUT_DIR/conformance.log);
#   4. whole-model outputs of the *.full.onnx truth exports against
#      onnxruntime (scripts/compare_ort.py: OUT_DIR/compare-ort.log and
#      OUT_DIR/ort/, with compare_ort.json).
#
# Usage: scripts/gpu_verify.sh [BUILD_DIR] [OUT_DIR]
#   BUILD_DIR  a meson build folder (default build-verify); built here if it
#              has no memest yet (needs meson, ninja, nvcc, protobuf-c, cJSON).
#              A prebuilt folder may carry the shared libraries this machine
#              lacks (libprotobuf-c.so.1, libcjson.so.1) in BUILD_DIR/deps.
#   OUT_DIR    where results go (default BUILD_DIR/gpu-verify).
# Environment: TRUTH (default ../shared/truth/onnx, else BUILD_DIR/shared/truth/onnx),
#   BATCHES ("8 32"), SKIP_TESTS=1 to skip step 1,
#   NODE_TESTS (default ../shared/onnx-node-tests, else BUILD_DIR/shared/onnx-node-tests),
#   SKIP_CONFORMANCE=1, SKIP_ORT=1, SKIP_SWEEP=1 to skip steps 3, 4, 2,
#   MODELS (files to sweep, default TRUTH/*.legacy-train.onnx), RUNS (mode:optimizer
#   pairs, default "train:sgd train:momentum train:adam infer:-"), FLAGS (more
#   flags for every sweep run, e.g. "--trainable fc."; its runs' files are
#   named with TAG, default none).
# scripts/stage_gpu.sh makes a prebuilt folder to carry to a GPU machine.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build-verify}
case $build in /*) ;; *) build=$here/$build ;; esac
out=${2:-$build/gpu-verify}
mkdir -p "$out"

# Libraries: the carried ones, the CUDA toolkit's, pip's cuBLAS as a fallback.
pip_cublas=$(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__)+"/lib")' 2>/dev/null || true)
LD_LIBRARY_PATH="$build/deps:/usr/local/cuda/lib64${pip_cublas:+:$pip_cublas}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH

if [ ! -x "$build/cli/memest" ]; then
    echo "== building $build"
    meson setup "$build" "$here" -Dverify=enabled && ninja -C "$build" || exit 1
fi
memest=$build/cli/memest

truth=${TRUTH:-$here/../shared/truth/onnx}
[ -d "$truth" ] || truth=$build/shared/truth/onnx
echo "== truth models: $truth"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null

status=0
if [ "${SKIP_TESTS:-0}" != 1 ]; then
    echo "== meson test --suite gpu"
    # meson test may want to rebuild; a prebuilt folder runs its tests directly.
    if command -v meson >/dev/null && meson test -C "$build" --suite gpu --no-rebuild --print-errorlogs >"$out/gpu-tests.log" 2>&1; then
        echo "gpu suite: ok"
    else
        echo "gpu suite under meson failed or unavailable (see $out/gpu-tests.log); running the binaries"
        tail -5 "$out/gpu-tests.log"
        if [ -x "$build/tests/gpu/test_grad" ]; then
            "$build/tests/gpu/test_grad" >"$out/test-grad.log" 2>&1
            rc=$?; echo "test_grad: exit $rc"; tail -15 "$out/test-grad.log"
            [ $rc -ne 0 ] && [ $rc -ne 77 ] && status=1
        fi
    fi
    MEMEST_VERIFY_MODULE=$build/verify/libmemest_verify.so "$build/tests/gpu/test_verify_models" "$truth" >"$out/verify-models.log" 2>&1
    rc=$?
    cat "$out/verify-models.log"
    [ $rc -ne 0 ] && [ $rc -ne 77 ] && status=1
fi

if [ "${SKIP_CONFORMANCE:-0}" != 1 ]; then
    echo "== conformance (ONNX node tests)"
    nodetests=${NODE_TESTS:-$here/../shared/onnx-node-tests}
    [ -d "$nodetests" ] || nodetests=$build/shared/onnx-node-tests
    if [ -x "$build/tests/gpu/test_verify_conformance" ]; then
        MEMEST_VERIFY_MODULE=$build/verify/libmemest_verify.so "$build/tests/gpu/test_verify_conformance" "$nodetests" \
            >"$out/conformance.log" 2>&1
        rc=$?
        grep -v '^unsupported ' "$out/conformance.log" | tail -60
        echo "test_verify_conformance: exit $rc (full log: $out/conformance.log)"
        [ $rc -ne 0 ] && [ $rc -ne 77 ] && status=1
    else
        echo "no $build/tests/gpu/test_verify_conformance"
    fi
fi

if [ "${SKIP_ORT:-0}" != 1 ]; then
    echo "== outputs against onnxruntime (*.full.onnx)"
    if python3 -c 'import onnxruntime, numpy' 2>/dev/null; then
        set -- "$truth"/*.full.onnx
        if [ -e "$1" ]; then
            python3 "$here/scripts/compare_ort.py" --memest "$memest" --out "$out/ort" "$@" >"$out/compare-ort.log" 2>&1
            rc=$?
            cat "$out/compare-ort.log"
            [ $rc -ne 0 ] && status=1
        else
            echo "no *.full.onnx in $truth"
        fi
    else
        echo "python3 lacks onnxruntime or numpy: skipped"
    fi
fi

if [ "${SKIP_SWEEP:-0}" = 1 ]; then
    echo "results in $out"
    exit $status
fi

echo "== sweep"
table=$out/sweep.tsv
printf 'model\tmode\toptimizer\tbatch\testimate\tmeasured\terror\tstep_ms\tstatus\n' >"$table"
for f in ${MODELS:-"$truth"/*.legacy-train.onnx}; do
    m=$(basename "$f" .onnx)
    m=${m%.legacy-train}
    for b in ${BATCHES:-8 32}; do
        for run in ${RUNS:-train:sgd train:momentum train:adam infer:-}; do
            set -- $(echo "$run" | tr : ' ')
            args="--batch $b --mode $1"
            [ "$2" != - ] && args="$args --optimizer $2"
            args="$args ${FLAGS:-}"
            j=$out/$m${TAG:+.$TAG}.$1.$2.b$b.json
            "$memest" verify "$f" $args --format json --tolerance 100000 >"$j" 2>"$j.err"
            rc=$?
            python3 - "$j" "$m" "$1" "$2" "$b" "$rc" "$j.err" >>"$table" <<'PY'
import json, sys
j, m, mode, opt, b, rc, errf = sys.argv[1:]
try:
    d = json.load(open(j))
except Exception:
    msg = open(errf).read().strip().replace("\t", " ").replace("\n", " ")[:200]
    print(f"{m}\t{mode}\t{opt}\t{b}\t\t\t\t\terror: {msg}")
    sys.exit()
if "peak" not in d:
    print(f"{m}\t{mode}\t{opt}\t{b}\t{d.get('estimated_peak','')}\t\t\t\tdoes not fit")
    sys.exit()
p = d["peak"]
e = p["error"]
print(f"{m}\t{mode}\t{opt}\t{b}\t{p['estimate']}\t{p['measured']}\t{'' if e is None else f'{100*e:+.2f}%'}\t{d['step_ms']:.2f}\tok")
PY
        done
    done
done
column -t -s "$(printf '\t')" "$table" 2>/dev/null || cat "$table"
echo "results in $out"
exit $status
