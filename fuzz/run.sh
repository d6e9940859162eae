#!/bin/sh
# run.sh: one libFuzzer run in the background, as docs/robustness.md records.
#   fuzz/run.sh HARNESS [SECONDS] [RUNS]    (needs build-fuzz, see fuzz/meson.build)
# Logs, new corpus and crash artifacts go to fuzz/out-HARNESS/ (git-ignored).
set -eu
cd "$(dirname "$0")/.."
h=${1:?usage: fuzz/run.sh HARNESS [SECONDS] [RUNS]}
secs=${2:-1800}
runs=${3:-10000000}
out=fuzz/out-$h
mkdir -p "$out/corpus"
case $h in
onnx) cp fuzz/onnx.dict "$out/run.dict" ;;
json) cp fuzz/json.dict "$out/run.dict" ;;
*) cat fuzz/onnx.dict fuzz/json.dict >"$out/run.dict" ;;
esac
seeds=fuzz/out-seeds/$h
[ -d "$seeds" ] || seeds=
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
stamp=$(date +%Y%m%d-%H%M%S)
nohup build-fuzz/fuzz/fuzz_$h -dict="$out/run.dict" -max_total_time="$secs" -runs="$runs" \
    -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -artifact_prefix="$out/" \
    "$out/corpus" fuzz/corpus/$h $seeds >"$out/log-$stamp.txt" 2>&1 &
echo "$!" >"$out/pid"
echo "fuzz_$h: pid $!, log $out/log-$stamp.txt"
