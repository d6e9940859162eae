# Sourced by the device scripts (run_blind.sh, run_probes.sh, run_capacity.sh,
# run_finetune.sh, run_probe_finetune.sh) before their own work: defines
# print_versions, fails a pipeline when any command in it fails, makes
# $OUT (default bench/accuracy/out) and makes it absolute, runs from
# bench/accuracy, keeps Python unbuffered for the log, and names the GPU.
set -o pipefail
OUT=${OUT:-$(dirname "$0")/out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")" || exit 1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

# Prints the versions of torch (with CUDA and cuDNN) and of the Python
# packages named, "missing" for one that is not installed.
print_versions() {
    python3 - "$@" <<'PY'
import sys
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
for m in sys.argv[1:]:
    try:
        print(m, __import__(m).__version__)
    except ImportError:
        print(m, "missing")
PY
}
