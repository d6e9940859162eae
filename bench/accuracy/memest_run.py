"""What the compare scripts share: running memest on one export, and the
command line every one of them takes (--memest, --markdown, --only,
MEASURED.json, ONNX_DIR)."""
import argparse
import json
import subprocess


def estimate(memest, path, batch, *args):
    """memest PATH --batch BATCH --format json ARGS: (report dict, None), or
    (None, the last line memest wrote to stderr) when it failed."""
    try:
        out = subprocess.run([memest, path, "--batch", str(batch), "--format", "json", *args],
                             capture_output=True, text=True)
    except OSError as e:
        return None, str(e)
    if out.returncode:
        return None, (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]
    try:
        return json.loads(out.stdout), None
    except ValueError as e:
        return None, f"bad JSON from memest: {e!r}"[:120]


def argument_parser(description):
    """The options every compare script takes; add more before parse_args()."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--memest", default="build/cli/memest")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--only", default="", help="MODEL,... to compare (default: all)")
    return ap


def add_inputs(ap):
    """The two positional arguments, after any options a script adds."""
    ap.add_argument("measured")
    ap.add_argument("onnx_dir")


def load_models(measured, only):
    """(the whole measurement file, its models restricted to `only`)."""
    data = json.load(open(measured))
    models = data["models"]
    if only:
        models = {k: v for k, v in models.items() if k in only.split(",")}
    return data, models
