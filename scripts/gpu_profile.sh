#!/bin/sh
# gpu_profile.sh: on a GPU machine, from the repository root, with a folder
# scripts/stage_gpu.sh made (STAGE, default .gpu): `memest verify` of each
# staged model at each of BATCHES under MEMEST_VERIFY_PROFILE, so that
# $OUT/profile.jsonl says where each measured step's time goes by op type
# and phase (scripts/profile_table.py prints it), and $OUT/steps.tsv holds
# the unprofiled step time (ms) and the peak's error (%) of the same runs.
#   OUT=DIR [STAGE=.gpu] [BATCHES="32"] [FLAGS="--mode train --optimizer adam"] scripts/gpu_profile.sh
set -u
stage=${STAGE:-.gpu}
out=${OUT:?OUT is where results go}
mkdir -p "$out"
build=$stage/build
export LD_LIBRARY_PATH="$build/deps:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MEMEST_VERIFY_MODULE=$build/verify/libmemest_verify.so
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
status=0
for m in "$stage"/models/*.onnx; do
    for b in ${BATCHES:-32}; do
        name=$(basename "$m" .onnx)
        # shellcheck disable=SC2086
        ms=$("$build/cli/memest" verify "$m" --batch "$b" ${FLAGS:---mode train --optimizer adam} --format json \
              --tolerance 100000 2>>"$out/errors.log" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.2f\t%+.4f" % (d["step_ms"], 100 * d["peak"]["error"]))' 2>/dev/null)
        [ -n "$ms" ] || { status=1; ms=failed; }
        printf '%s\t%s\t%s\n' "$name" "$b" "$ms" | tee -a "$out/steps.tsv"
        # shellcheck disable=SC2086
        MEMEST_VERIFY_PROFILE=$out/profile.jsonl "$build/cli/memest" verify "$m" --batch "$b" \
            ${FLAGS:---mode train --optimizer adam} --tolerance 100000 >/dev/null 2>>"$out/errors.log" || status=1
    done
done
exit $status
