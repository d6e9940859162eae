#!/bin/sh
# run_parallel.sh: the harnesses at once on a many-core machine (the device
# machine's 16 cores), each split over libFuzzer jobs so that each makes RUNS
# executions in all (-runs is per job). docs/robustness.md, "Runs".
#   fuzz/run_parallel.sh BUILD_DIR OUT_DIR [RUNS] [SECONDS]
# BUILD_DIR holds fuzz/fuzz_* (see fuzz/meson.build) and, where the machine
# lacks them, deps/ with libprotobuf-c.so.1 and libcjson.so.1.
# JOBS="pipeline:8 onnx:4 json:4" (the default) says which harnesses, on how
# many cores. The jobs work in ${TMPDIR:-/tmp}/memest-fuzz; OUT_DIR gets, per
# harness, totals.txt (executions, artifacts, each job's last line), every
# crash artifact and the log of each job that found one.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=$1 out=$2 runs=${3:-10000000} secs=${4:-500}
case $build in /*) ;; *) build=$here/$build ;; esac
work=${TMPDIR:-/tmp}/memest-fuzz
mkdir -p "$out" "$work"
export LD_LIBRARY_PATH="$build/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
run() { # HARNESS JOBS
    h=$1 jobs=$2
    mkdir -p "$work/$h/corpus"
    case $h in
    onnx) cp "$here/fuzz/onnx.dict" "$work/$h/run.dict" ;;
    json) cp "$here/fuzz/json.dict" "$work/$h/run.dict" ;;
    *) cat "$here/fuzz/onnx.dict" "$here/fuzz/json.dict" >"$work/$h/run.dict" ;;
    esac
    (cd "$work/$h" && "$build/fuzz/fuzz_$h" -jobs="$jobs" -workers="$jobs" -runs=$((runs / jobs + 1)) \
        -max_total_time="$secs" -dict=run.dict -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$work/$h/" corpus "$here/fuzz/corpus/$h" >driver.log 2>&1) &
}
for spec in ${JOBS:-pipeline:8 onnx:4 json:4}; do run "${spec%%:*}" "${spec#*:}"; done
wait
for spec in ${JOBS:-pipeline:8 onnx:4 json:4}; do
    h=${spec%%:*}
    mkdir -p "$out/$h"
    execs=$(cat "$work/$h"/fuzz-*.log 2>/dev/null | awk '/stat::number_of_executed_units/ {s += $2} END {print s + 0}')
    {
        echo "harness $h, ${spec#*:} jobs"
        echo "executions $execs"
        for f in "$work/$h"/fuzz-*.log; do echo "$(basename "$f"): $(grep -E '^#[0-9]+' "$f" | tail -1)"; done
    } >"$out/$h/totals.txt"
    for a in "$work/$h"/crash-* "$work/$h"/leak-* "$work/$h"/timeout-* "$work/$h"/oom-*; do
        [ -e "$a" ] && cp "$a" "$out/$h/"
    done
    for f in $(grep -l -E "ERROR|deadly signal|meaning broken" "$work/$h"/fuzz-*.log 2>/dev/null); do
        cp "$f" "$out/$h/"
    done
    cat "$out/$h/totals.txt"
done
