# Sourced by the device scripts (run_blind.sh, run_probes.sh, run_capacity.sh)
# before their own work: fails a pipeline when any command in it fails, makes
# $OUT (default bench/accuracy/out) and makes it absolute, runs from
# bench/accuracy, keeps Python unbuffered for the log, and names the GPU.
set -o pipefail
OUT=${OUT:-$(dirname "$0")/out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")" || exit 1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
