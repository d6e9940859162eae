#!/usr/bin/env python3
"""Regenerate the tables of docs/accuracy.md from the measurements and the
memest binary, so the document matches the code.

usage: regen_docs.py [--memest PATH] [--check]   (from the repository root)

Each table sits between <!-- BEGIN generated: KEY --> and
<!-- END generated: KEY --> in docs/accuracy.md; TABLES below says which
compare script and which measurement file make it. The measurements live in
the git-ignored bench/accuracy/out/ (measured.json: the session-2 H200 run;
h100/: the session-4 H100 run of run_capacity.sh) and ../shared/truth/;
the fine-tuning measurements are committed in data/finetune/, their exports
(export_finetune.py) go to out/finetune/exports.
A table whose inputs are missing is left as it is, with a note on stderr.
--check rewrites nothing and exits 1 when a table would change.
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")
TRUTH = os.path.join(HERE, "..", "..", "..", "shared", "truth")
HARNESS_ONLY = ("resnet50,vgg11_bn,alexnet,densenet121,googlenet,shufflenet_v2_x1_0,mobilenet_v3_small,"
                "efficientnet_b0,regnet_x_400mf,convnext_tiny,vit_b_16,gpt2_6l,distilbert,convnet1d,mixer_mlp")

# key: (script, arguments, files that must exist, lines of the output to drop from the top)
TABLES = {
    "categories-truth": ("compare.py", ["--markdown", "--categories", f"{TRUTH}/truth.json", f"{TRUTH}/onnx"],
                         [f"{TRUTH}/truth.json"], 0),
    "categories-harness": ("compare.py", ["--markdown", "--categories", "--only", HARNESS_ONLY,
                                          f"{OUT}/measured.json", f"{OUT}/exports"], [f"{OUT}/measured.json"], 0),
    "truth": ("compare.py", ["--markdown", f"{TRUTH}/truth.json", f"{TRUTH}/onnx"], [f"{TRUTH}/truth.json"], 0),
    "harness": ("compare.py", ["--markdown", "--only", HARNESS_ONLY, f"{OUT}/measured.json", f"{OUT}/exports"],
                [f"{OUT}/measured.json"], 0),
    "harness-new": ("compare.py", ["--markdown", f"{OUT}/h100/measured_new.json", f"{OUT}/exports"],
                    [f"{OUT}/h100/measured_new.json"], 0),
    "harness-new2": ("compare.py", ["--markdown", f"{OUT}/h100/measured_new2.json", f"{OUT}/exports"],
                     [f"{OUT}/h100/measured_new2.json"], 0),
    "blind5a": ("compare.py", ["--markdown", f"{OUT}/h100/blind5/measured_blind.json", f"{OUT}/exports5"],
                [f"{OUT}/h100/blind5/measured_blind.json"], 0),
    "blind5b": ("compare.py", ["--markdown", f"{OUT}/h100/blind5b/measured_blind2.json", f"{OUT}/exports5b"],
                [f"{OUT}/h100/blind5b/measured_blind2.json"], 0),
    "blind6": ("compare.py", ["--markdown", f"{OUT}/h100/blind6/measured_blind.json", f"{OUT}/exports6"],
               [f"{OUT}/h100/blind6/measured_blind.json"], 0),
    "finetune": ("compare_finetune.py", ["--markdown", f"{HERE}/data/finetune/finetune_h100_run3.json",
                                         f"{HERE}/data/finetune/finetune_h100_run4.json",
                                         f"{OUT}/finetune/exports"], [f"{OUT}/finetune/exports"], 0),
    "amp-truth": ("compare_amp.py", ["--markdown", f"{TRUTH}/truth.json", f"{TRUTH}/onnx"],
                  [f"{TRUTH}/truth.json"], 0),
    "amp-harness": ("compare_amp.py", ["--markdown", f"{OUT}/h100/measured_cap.json", f"{OUT}/exports"],
                    [f"{OUT}/h100/measured_cap.json"], 0),
    "checkpoint": ("compare_checkpoint.py", ["--markdown", f"{OUT}/h100/checkpoint.json", f"{OUT}/exports"],
                   [f"{OUT}/h100/checkpoint.json"], 2),
    "checkpoint-amp": ("compare_checkpoint.py", ["--markdown", f"{OUT}/h100/checkpoint_amp.json", f"{OUT}/exports"],
                       [f"{OUT}/h100/checkpoint_amp.json"], 2),
    "reserved-summary": ("compare_reserved.py", ["--summary", "--amp", f"{OUT}/h100/measured_cap.json",
                                                 f"{OUT}/exports"], [f"{OUT}/h100/measured_cap.json"], 0),
    "reserved": ("compare_reserved.py", ["--markdown", "--amp", "--exports", "legacy-train,legacy", "--steps",
                                         "adam,infer,adam bf16", f"{OUT}/h100/measured_cap.json", f"{OUT}/exports"],
                 [f"{OUT}/h100/measured_cap.json"], 0),
}


def generate(memest, key):
    script, args, needs, skip = TABLES[key]
    missing = [n for n in needs if not os.path.exists(n)]
    if missing:
        print(f"regen_docs: {key}: missing {missing[0]}; left as it is", file=sys.stderr)
        return None
    out = subprocess.run([sys.executable, os.path.join(HERE, script), "--memest", memest, *args],
                         capture_output=True, text=True)
    if out.returncode:
        print(f"regen_docs: {key}: {script} failed: {out.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return "\n".join(out.stdout.strip().splitlines()[skip:]).strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memest", default="build/cli/memest")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    memest = os.path.abspath(a.memest)
    path = os.path.join(HERE, "..", "..", "docs", "accuracy.md")
    text = open(path).read()
    changed = []
    for key in TABLES:
        pat = re.compile(rf"(<!-- BEGIN generated: {re.escape(key)} -->\n)(.*?)(\n<!-- END generated: {re.escape(key)} -->)",
                         re.S)
        m = pat.search(text)
        if not m:
            print(f"regen_docs: no markers for {key} in docs/accuracy.md", file=sys.stderr)
            continue
        table = generate(memest, key)
        if table is None or table == m.group(2).strip():
            continue
        changed.append(key)
        text = text[:m.start(2)] + table + text[m.end(2):]
    if a.check:
        print("changed: " + (", ".join(changed) or "none"))
        return 1 if changed else 0
    if changed:
        open(path, "w").write(text)
    print("regenerated: " + (", ".join(changed) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
