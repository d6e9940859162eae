#!/bin/sh
# make_seeds.sh: builds the seed corpora the fuzzers start from, in
# fuzz/out-seeds/<harness>/ (git-ignored): the models in models/, the ONNX
# node tests' small models (../shared/onnx-node-tests), and each of those
# converted to the JSON format by memest. The pipeline seeds are each model
# behind an 8-byte options prefix (fuzz/fuzz_pipeline.c).
#
#   fuzz/make_seeds.sh BUILD_DIR      (BUILD_DIR holds cli/memest)
set -eu
cd "$(dirname "$0")/.."
build=${1:?usage: fuzz/make_seeds.sh BUILD_DIR}
memest=$build/cli/memest
out=fuzz/out-seeds
rm -rf "$out"
mkdir -p "$out/onnx" "$out/json" "$out/pipeline"

cp models/*.onnx "$out/onnx/"
cp models/*.json "$out/json/"
nodes=../shared/onnx-node-tests
if [ -d "$nodes" ]; then
    for m in "$nodes"/*/model.onnx; do
        # small models only: the fuzzer mutates faster on short inputs
        [ "$(wc -c <"$m")" -le 4096 ] || continue
        cp "$m" "$out/onnx/$(basename "$(dirname "$m")").onnx"
    done
fi
for m in "$out"/onnx/*.onnx; do
    "$memest" convert "$m" -o "$out/json/$(basename "$m" .onnx).json" >/dev/null 2>&1 || true
done

# Options prefixes: training with Adam at batch 2, inference in float16,
# SGD with momentum in bfloat16 at batch 64, dims bound past the limit.
i=0
for m in "$out"/onnx/* "$out"/json/*; do
    case $((i % 4)) in
    0) prefix='\040\001\007\007\007\007\007\007' ;;
    1) prefix='\011\000\017\017\017\017\017\017' ;;
    2) prefix='\066\077\003\003\003\003\003\003' ;;
    3) prefix='\040\003\377\001\001\001\001\001' ;;
    esac
    { printf "$prefix"; cat "$m"; } >"$out/pipeline/$i"
    i=$((i + 1))
done
echo "seeds: $(ls "$out/onnx" | wc -l) onnx, $(ls "$out/json" | wc -l) json, $(ls "$out/pipeline" | wc -l) pipeline"
