#!/bin/sh
# stage_gpu.sh: gathers what scripts/gpu_verify.sh needs on a GPU machine
# into one folder small enough to carry with the device tool (64 MiB):
#   STAGE/build   memest, libestimate, the verify module and the GPU test
#                 binaries of BUILD, in BUILD's layout (their $ORIGIN rpaths
#                 hold), and deps/ with libprotobuf-c.so.1 and libcjson.so.1;
#   STAGE/truth   the truth models' legacy-train exports (../shared/truth/onnx);
#   STAGE/node-tests  the ONNX node tests whose names contain one of
#                 NODE_FILTER's words (default: every case would be 54 MiB);
#   STAGE/models  the models named on the command line.
# usage: scripts/stage_gpu.sh BUILD STAGE [MODEL.onnx ...]
# then, on the GPU machine:
#   TRUTH=STAGE/truth NODE_TESTS=STAGE/node-tests MODELS="STAGE/models/*.onnx" \
#       scripts/gpu_verify.sh STAGE/build OUT
set -eu
[ $# -ge 2 ] || { echo "usage: $0 BUILD STAGE [MODEL.onnx ...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
build=$1 stage=$2
shift 2
# meson does not see the .cu files' header dependencies: rebuild them all,
# so that no object keeps a struct layout from an older header.
find "$build" -name '*.cu.o' -delete
ninja -C "$build" >/dev/null
rm -rf "$stage"
mkdir -p "$stage/build/cli" "$stage/build/libestimate" "$stage/build/verify" "$stage/build/tests/gpu" \
    "$stage/build/deps" "$stage/truth" "$stage/node-tests" "$stage/models"
cp "$build/cli/memest" "$stage/build/cli/"
for l in "$build"/libestimate/libestimate.so*; do [ -d "$l" ] || cp -P "$l" "$stage/build/libestimate/"; done
cp "$build/verify/libmemest_verify.so" "$stage/build/verify/"
for t in test_grad test_grad_elementwise test_verify_models test_verify_conformance; do
    [ -x "$build/tests/gpu/$t" ] && cp "$build/tests/gpu/$t" "$stage/build/tests/gpu/"
done
for lib in $(ldd "$build/cli/memest" "$build/libestimate/libestimate.so.0" | awk '/libprotobuf-c|libcjson/ {print $3}' | sort -u); do
    cp -L "$lib" "$stage/build/deps/"
done
cp "$here"/../shared/truth/onnx/*.legacy-train.onnx "$stage/truth/"
for w in ${NODE_FILTER:-lstm gru rnn}; do
    for d in "$here"/../shared/onnx-node-tests/*"$w"*; do
        [ -d "$d" ] && cp -r "$d" "$stage/node-tests/"
    done
done
for m in "$@"; do cp "$m" "$stage/models/"; done
du -sh "$stage"
