#!/bin/sh
# gpu_profile.sh: on a GPU machine, from the repository root, with a folder
# scripts/stage_gpu.sh made (STAGE, default .gpu): `memest verify` of each
# staged model at each of BATCHES under MEMEST_VERIFY_PROFILE, so that
# $OUT/profile.jsonl says where each measured step's time goes by op type
# and phase (scripts/profile_table.py prints it), and $OUT/steps.tsv holds,
# per model and batch, the median of REPEAT unprofiled runs' step times
# (ms), the peak's error (%) and each run's step time.
#   OUT=DIR [STAGE=.gpu] [BATCHES="32"] [REPEAT=3] [FLAGS="--mode train --optimizer adam"] \
#       [MODELS="FILE.onnx ..."] scripts/gpu_profile.sh       (MODELS: default every staged model)
set -u
stage=${STAGE:-.gpu}
out=${OUT:?OUT is where results go}
mkdir -p "$out"
build=$stage/build
export LD_LIBRARY_PATH="$build/deps:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MEMEST_VERIFY_MODULE=$build/verify/libmemest_verify.so
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
status=0
for m in ${MODELS:-"$stage"/models/*.onnx}; do
    for b in ${BATCHES:-32}; do
        name=$(basename "$m" .onnx)
        # the median of REPEAT runs' measured steps (a step moves by some 10%
        # from run to run on a shared machine)
        runs=""
        for r in $(seq "${REPEAT:-3}"); do
            # shellcheck disable=SC2086
            "$build/cli/memest" verify "$m" --batch "$b" ${FLAGS:---mode train --optimizer adam} --format json \
                --tolerance 100000 >"$out/run.json" 2>>"$out/errors.log" && runs="$runs $out/run.json.$r" && cp "$out/run.json" "$out/run.json.$r"
        done
        ms=$(python3 - $runs <<'PY' 2>/dev/null
import json, statistics, sys
d = [json.load(open(f)) for f in sys.argv[1:]]
print("%.2f\t%+.4f\t%s" % (statistics.median(x["step_ms"] for x in d), 100 * d[0]["peak"]["error"],
                            ",".join("%.2f" % x["step_ms"] for x in d)))
PY
)
        rm -f "$out"/run.json*
        [ -n "$ms" ] || { status=1; ms=failed; }
        printf '%s\t%s\t%s\n' "$name" "$b" "$ms" | tee -a "$out/steps.tsv"
        # shellcheck disable=SC2086
        MEMEST_VERIFY_PROFILE=$out/profile.jsonl "$build/cli/memest" verify "$m" --batch "$b" \
            ${FLAGS:---mode train --optimizer adam} --tolerance 100000 >/dev/null 2>>"$out/errors.log" || status=1
    done
done
exit $status
