#!/usr/bin/env python3
"""Regenerate the tables of docs/accuracy.md from the committed measurements
and the memest binary, so the document matches the code.

usage: regen_docs.py [--memest PATH] [--check] [--only KEY,...]   (from the repository root)

Each table sits between <!-- BEGIN generated: KEY --> and
<!-- END generated: KEY --> in docs/accuracy.md. RUNS below says which
compare script runs on which measurement file; TABLES says how each table is
made from the output of one or more runs (the output as it is, or a view of
its rows: one line per model, the rows beyond target, the summary).

Measurements:
- data/capacity/ (committed; its README says how they were made): the
  H100 run of 2026-11-24 of every zoo model (measured_cap_h100.json:
  inference, training, autocast, reserved bytes), of the checkpointing cases
  (checkpoint_h100.json) and of MemTracker's categories
  (measured_harness_h100.json, measured_rest_h100.json);
- data/finetune/ (committed): fine-tuning runs 3 and 4 (H100, 2026-11-24);
- ../distributed/data/h100_w1_fresh/ (committed): data parallelism at world
  size 1 (H100, 2026-11-24; bench/distributed/run_dist.sh);
- ../distributed/data/h200x2_w2*/ and h100x4_w2/, h100x4_w4/ (committed):
  world sizes 2 (H200 x2, 2026-11-24; H100 x4, 2026-11-26) and 4 (H100 x4,
  2026-11-26);
- ../distributed/data/h200x4_race/ (committed): the DDP family again at
  world sizes 1, 2 and 4 (H200 x4, 2026-11-27; run_ddp_race.sh);
- ../distributed/data/h100x4_tp/ (committed): tensor parallelism at world
  sizes 2 and 4 (H100 x4, 2026-11-27; run_tp.sh);
- ../distributed/data/h100x4_models/ (committed): every strategy on qwen2_4l
  and gpt2_6l at world sizes 2 and 4 (H100 x4, 2026-11-27; run_models.sh);
- ../shared/truth/truth.json and its onnx/ (the shared truth, H200; read in
  place, never copied);
- data/rnn/ (committed): the recurrent zoo models (H100, 2026-11-24;
  run_rnn.sh);
- data/families/ (committed): seven models of families the zoo lacked
  (H100, 2026-11-24; run_models.sh);
- data/blind/ (committed): Hugging Face's encoder-decoders T5 and BART,
  measured after the frame and reduction rules (H100, 2026-11-24;
  run_models.sh);
- data/blind3/ (committed): five more families (GPT-NeoX, BLOOM,
  DeBERTa-v2, Whisper's encoder, MaxViT), measured once as a blind check
  (H100, 2026-11-27; run_models.sh, run_max_batch.sh);
- data/blind4/ (committed): a second blind check of five families
  (Falcon, CLIP's vision tower, SegFormer, Swin V2, Inception v3; H100,
  2026-11-27; run_models.sh, run_max_batch.sh);
- data/blind5/ (committed): a third blind check of five families (Gemma,
  GPT-BigCode, MobileBERT, DINOv2, ConvNeXt V2; H100, 2026-11-27;
  run_models.sh, run_max_batch.sh);
- data/time/ (committed): time_layers.py's runs on the H100 and the H200
  machines (2026-11-24), against which compare_time.py sets the step time.
Exports (git-ignored, made on a CPU): out/exports by
`python3 bench/accuracy/export.py bench/accuracy/out/exports`, out/finetune/exports
by export_finetune.py (data/finetune/README.md).

Every table must regenerate: a missing input or a memest failure leaves that
table as it is, says so on stderr and makes the exit status 1.
--check rewrites nothing and exits 1 when a table would change (or could not
be made). --only remakes the tables named and leaves the others as they are
(a run whose exports are only partly made would otherwise rewrite tables
from the models it finds).
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(HERE, "out")
EXPORTS = os.path.join(OUT, "exports")
CAPACITY = os.path.join(HERE, "data", "capacity")
FINETUNE = os.path.join(HERE, "data", "finetune")
TRUTH = os.path.normpath(os.path.join(ROOT, "..", "shared", "truth"))
CAP = os.path.join(CAPACITY, "measured_cap_h100.json")
CHECKPOINT = os.path.join(CAPACITY, "checkpoint_h100.json")
HARNESS = os.path.join(CAPACITY, "measured_harness_h100.json")
REST = os.path.join(CAPACITY, "measured_rest_h100.json")
TRUTH_JSON = os.path.join(TRUTH, "truth.json")
# bench/distributed's runs: world size 1 (one job per configuration, H100);
# world size 2 (H200 x2): every configuration in one job per model, and the
# DDP, ZeRO-1 and FSDP ones at batch 8 again, one job each; world sizes 2
# and 4 on 4 H100s, one job per configuration
DISTRIBUTED = [os.path.join(ROOT, "bench", "distributed", "data", "h100_w1_fresh", f"dist_w1_{m}.json")
               for m in ("resnet50", "vit_b_16", "bert_base", "llama_4l")]
DISTRIBUTED_W2 = [os.path.join(ROOT, "bench", "distributed", "data", "h200x2_w2", f"dist_w2_{m}.json")
                  for m in ("resnet50", "vit_b_16", "bert_base", "llama_4l")]
DISTRIBUTED_W2_FRESH = [os.path.join(ROOT, "bench", "distributed", "data", "h200x2_w2_fresh", f"dist_w2_fresh_{m}.json")
                        for m in ("bert_base", "llama_4l")]
DISTRIBUTED_H100X4 = {w: [os.path.join(ROOT, "bench", "distributed", "data", f"h100x4_w{w}", f"dist_w{w}_{m}.json")
                          for m in ("resnet50", "vit_b_16", "bert_base", "llama_4l")] for w in (2, 4)}
# DDP's first-bucket race sampled again: the DDP family at world sizes 1, 2
# and 4 on 4 H200s (bench/distributed/run_ddp_race.sh)
DISTRIBUTED_RACE = {w: [os.path.join(ROOT, "bench", "distributed", "data", "h200x4_race", f"w{w}", f"dist_w{w}_{m}.json")
                        for m in ("resnet50", "vit_b_16", "bert_base", "llama_4l")] for w in (1, 2, 4)}
# tensor parallelism of every TP_PLANS model at world sizes 2 and 4 (H100 x4;
# bench/distributed/run_tp.sh)
DISTRIBUTED_TP = [os.path.join(ROOT, "bench", "distributed", "data", "h100x4_tp", f"w{w}", f"dist_w{w}_{m}.json")
                  for w in (2, 4) for m in ("bert_base", "qwen2_4l", "llama_4l")]
# every strategy on two models the rules were not made on (H100 x4;
# bench/distributed/run_models.sh)
DISTRIBUTED_MODELS = [os.path.join(ROOT, "bench", "distributed", "data", "h100x4_models", f"w{w}", f"dist_w{w}_{m}.json")
                      for w in (2, 4) for m in ("qwen2_4l", "gpt2_6l")]
# the FSDP family and ZeRO-1 on four models no rule was made on (4 H200s;
# convnext_tiny at world size 2 again on 2 H200s; bench/distributed/run_models.sh)
DISTRIBUTED_MODELS_H200 = [os.path.join(ROOT, "bench", "distributed", "data", "h200x4_models", f"w{w}",
                                        f"dist_w{w}_{m}.json")
                           for w in (2, 4) for m in ("distilbert", "t5_encoder", "convnext_tiny", "swin_t")]
# docs/accuracy.md's tables of bench/distributed's runs: key -> (the
# compare script, the measurement files)
DIST_TABLES = {
    "distributed": ("compare_dist.py", DISTRIBUTED),
    "distributed-w2": ("compare_dist.py", DISTRIBUTED_W2),
    "distributed-w2-fresh": ("compare_dist.py", DISTRIBUTED_W2_FRESH),
    **{f"distributed-w{w}-h100": ("compare_dist.py", files) for w, files in DISTRIBUTED_H100X4.items()},
    **{f"distributed-race-w{w}": ("compare_dist.py", files) for w, files in DISTRIBUTED_RACE.items()},
    "distributed-ranks": ("compare_ranks.py", DISTRIBUTED_H100X4[2] + DISTRIBUTED_H100X4[4]),
    "distributed-ranks-race": ("compare_ranks.py", DISTRIBUTED_RACE[1] + DISTRIBUTED_RACE[2] + DISTRIBUTED_RACE[4]),
    "distributed-tp": ("compare_dist.py", DISTRIBUTED_TP),
    "distributed-tp-ranks": ("compare_ranks.py", DISTRIBUTED_TP),
    "distributed-models": ("compare_dist.py", DISTRIBUTED_MODELS),
    "distributed-models-ranks": ("compare_ranks.py", DISTRIBUTED_MODELS),
    "distributed-models-h200": ("compare_dist.py", DISTRIBUTED_MODELS_H200),
    "distributed-models-h200-ranks": ("compare_ranks.py", DISTRIBUTED_MODELS_H200),
}


def dist_run(script, files):
    """A RUNS entry: bench/distributed's compare script over the files (the
    first one checked for before it runs)."""
    return (os.path.join("..", "distributed", script), ["--markdown"] + files + [EXPORTS], files[0], EXPORTS)


TRUTH_ONNX = os.path.join(TRUTH, "onnx")
RECURRENT = os.path.join(HERE, "data", "rnn", "measured_rnn_h100_run1.json")
FAMILIES = os.path.join(HERE, "data", "families", "measured_families_h100_run1.json")
BLIND = os.path.join(HERE, "data", "blind", "measured_blind_h100_run1.json")
MAX_BATCH_BLIND = os.path.join(HERE, "data", "blind", "max_batch_blind_h100_run1.json")
BLIND3 = os.path.join(HERE, "data", "blind3", "measured_blind3_h100_run1.json")
MAX_BATCH_BLIND3 = os.path.join(HERE, "data", "blind3", "max_batch_blind3_h100_run1.json")
BLIND4 = os.path.join(HERE, "data", "blind4", "measured_blind4_h100_run1.json")
MAX_BATCH_BLIND4 = os.path.join(HERE, "data", "blind4", "max_batch_blind4_h100_run1.json")
BLIND5 = os.path.join(HERE, "data", "blind5", "measured_blind5_h100_run1.json")
MAX_BATCH_BLIND5 = os.path.join(HERE, "data", "blind5", "max_batch_blind5_h100_run1.json")
MAX_BATCH_H100 = os.path.join(CAPACITY, "max_batch_h100_run1.json")
MAX_BATCH_H200 = os.path.join(CAPACITY, "max_batch_h200_run1.json")
TIME_H100 = os.path.join(HERE, "data", "time", "time_layers_h100_run1.json")
TIME_H200 = os.path.join(HERE, "data", "time", "time_layers_h200_run1.json")
# The 15 models of measured_harness_h100.json (data/capacity/README.md names this list).
HARNESS_ONLY = ("resnet50,vgg11_bn,alexnet,densenet121,googlenet,shufflenet_v2_x1_0,mobilenet_v3_small,"
                "efficientnet_b0,regnet_x_400mf,convnext_tiny,vit_b_16,gpt2_6l,distilbert,convnet1d,mixer_mlp")

# run: (script, arguments, measurement file the run names in its tables, exports it needs)
RUNS = {
    "truth": ("compare.py", ["--markdown", TRUTH_JSON, TRUTH_ONNX], TRUTH_JSON, TRUTH_ONNX),
    "categories-truth": ("compare.py", ["--markdown", "--categories", TRUTH_JSON, TRUTH_ONNX], TRUTH_JSON,
                         TRUTH_ONNX),
    "amp-truth": ("compare_amp.py", ["--markdown", TRUTH_JSON, TRUTH_ONNX], TRUTH_JSON, TRUTH_ONNX),
    "zoo": ("compare.py", ["--markdown", CAP, EXPORTS], CAP, EXPORTS),
    "categories-harness": ("compare.py", ["--markdown", "--categories", HARNESS, EXPORTS], HARNESS, EXPORTS),
    "categories-rest": ("compare.py", ["--markdown", "--categories", REST, EXPORTS], REST, EXPORTS),
    "amp": ("compare_amp.py", ["--markdown", CAP, EXPORTS], CAP, EXPORTS),
    "checkpoint": ("compare_checkpoint.py", ["--markdown", CHECKPOINT, EXPORTS], CHECKPOINT, EXPORTS),
    "reserved-summary": ("compare_reserved.py", ["--summary", "--amp", CAP, EXPORTS], CAP, EXPORTS),
    "reserved": ("compare_reserved.py", ["--markdown", "--amp", CAP, EXPORTS], CAP, EXPORTS),
    **{key: dist_run(script, files) for key, (script, files) in DIST_TABLES.items()},
    "recurrent": ("compare.py", ["--markdown", RECURRENT, EXPORTS], RECURRENT, EXPORTS),
    "families": ("compare.py", ["--markdown", FAMILIES, EXPORTS], FAMILIES, EXPORTS),
    "blind": ("compare.py", ["--markdown", BLIND, EXPORTS], BLIND, EXPORTS),
    "max-batch-blind": ("compare_max_batch.py", ["--markdown", MAX_BATCH_BLIND, "H100-80GB", EXPORTS],
                        MAX_BATCH_BLIND, EXPORTS),
    "blind3": ("compare.py", ["--markdown", BLIND3, EXPORTS], BLIND3, EXPORTS),
    "max-batch-blind3": ("compare_max_batch.py", ["--markdown", MAX_BATCH_BLIND3, "H100-80GB", EXPORTS],
                         MAX_BATCH_BLIND3, EXPORTS),
    "blind4": ("compare.py", ["--markdown", BLIND4, EXPORTS], BLIND4, EXPORTS),
    "max-batch-blind4": ("compare_max_batch.py", ["--markdown", MAX_BATCH_BLIND4, "H100-80GB", EXPORTS],
                         MAX_BATCH_BLIND4, EXPORTS),
    "blind5": ("compare.py", ["--markdown", BLIND5, EXPORTS], BLIND5, EXPORTS),
    "max-batch-blind5": ("compare_max_batch.py", ["--markdown", MAX_BATCH_BLIND5, "H100-80GB", EXPORTS],
                         MAX_BATCH_BLIND5, EXPORTS),
    "max-batch-h100": ("compare_max_batch.py", ["--markdown", MAX_BATCH_H100, "H100-80GB", EXPORTS], MAX_BATCH_H100,
                       EXPORTS),
    "max-batch-h200": ("compare_max_batch.py", ["--markdown", MAX_BATCH_H200, "H200", EXPORTS], MAX_BATCH_H200,
                       EXPORTS),
    "time-h100": ("compare_time.py", ["--markdown", TIME_H100, EXPORTS], TIME_H100, EXPORTS),
    "time-h200": ("compare_time.py", ["--markdown", TIME_H200, EXPORTS], TIME_H200, EXPORTS),
    "time-ops-h100": ("compare_time.py", ["--markdown", "--by-op", TIME_H100, EXPORTS], TIME_H100, EXPORTS),
    "finetune": ("compare_finetune.py", ["--markdown", os.path.join(FINETUNE, "finetune_h100_run3.json"),
                                         os.path.join(FINETUNE, "finetune_h100_run4.json"),
                                         os.path.join(OUT, "finetune", "exports")],
                 None, os.path.join(OUT, "finetune", "exports")),
}


def rel(path):
    """A path as the docs write it: from the repository root, ../shared for the truth."""
    return os.path.relpath(path, ROOT)


def source_line(run):
    """Which file the rows of a run come from, and the machine and date it names."""
    measured = RUNS[run][2]
    d = json.load(open(measured))
    what = ", ".join(x for x in (d.get("device"), d.get("torch") and f"torch {d['torch']}",
                                 d.get("cudnn") and f"cuDNN {d['cudnn']}", d.get("date")) if x)
    onnx = RUNS[run][3]
    return f"Measured: `{rel(measured)}` ({what}); estimated: the current memest on `{rel(onnx)}`."


# --- reading a compare script's markdown ---------------------------------------------------------

class Output:
    def __init__(self, text):
        self.text = text
        self.lines = text.strip().splitlines()
        self.header, self.rows, self.after = None, [], []
        for line in self.lines:
            if line.startswith("| "):
                cells = [c.strip() for c in line.strip()[1:-1].split("|")]
                if self.header is None:
                    self.header = cells
                else:
                    self.rows.append(dict(zip(self.header, cells)))
            elif line.startswith("|---"):
                continue
            elif self.header is not None and line.strip():
                self.after.append(line[2:] if line.startswith("- ") else line)

    def failures(self, categories=False):
        """Rows where memest failed: a cell that is memest's error, a reserved
        row without memest's peak, or (compare.py --categories, whose output
        is all rows) any line that is not a row."""
        bad = [" | ".join(r.values()) for r in self.rows
               if any(v == "error" or v.startswith("error:") for v in r.values()) or r.get("memest peak") == "-"]
        return bad + (self.after if categories else [])


def pct(cell):
    """-3.4% -> -3.4; anything else (a row with no error) -> None."""
    m = re.fullmatch(r"([+-]?\d+(?:\.\d+)?)%", cell or "")
    return float(m.group(1)) if m else None


def upper_median(values):
    """The median as the compare scripts take it: the middle of the sorted
    values, the upper one for an even count."""
    s = sorted(values)
    return s[len(s) // 2]


def span(errors):
    """The signed errors of a set of rows as 'lowest .. highest' (one value when equal)."""
    if not errors:
        return "-"
    lo, hi = min(errors), max(errors)
    return f"{lo:+.1f}" if lo == hi else f"{lo:+.1f} .. {hi:+.1f}"


def table(head, rows, align=None):
    align = align or ["---"] + ["---:"] * (len(head) - 1)
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


# --- targets --------------------------------------------------------------------------------------

def target(batch, infer):
    """The target of a row, in percent of the measured peak (None: no target).
    Training: 5% at batch >= 4, 10% below; inference: 5% at batch >= 4, none below."""
    if batch >= 4:
        return 5.0
    return None if infer else 10.0


def zoo_rows(out):
    """(model, step, batch, export, case, error %, measured MiB) of compare.py's rows."""
    for r in out.rows:
        infer = r["case"] == "infer"
        yield (r["model"], "inference" if infer else "training", int(r["batch"]), r["export"], r["case"],
               pct(r["error"]), r["measured MiB"])


def amp_rows(out):
    for r in out.rows:
        yield r["model"], "autocast", int(r["batch"]), r["export"], r["amp"], pct(r["error"]), r["measured MiB"]


def checkpoint_rows(out):
    for r in out.rows:
        if r["checkpoint"] != "none":
            yield (r["model"], "checkpoint " + r["checkpoint"], int(r["batch"]), r["export"], r["optimizer"],
                   pct(r["error"]), r["measured MiB"])


def beyond(rows):
    return [r for r in rows if r[5] is not None and (t := target(r[2], r[1] == "inference")) is not None
            and abs(r[5]) > t]


# --- views ----------------------------------------------------------------------------------------

def view_raw(outs, run, skip=0, source=True):
    lines = outs[run].lines[skip:]
    return ([source_line(run), ""] if source else []) + lines


def view_one_export(outs, run):
    """A script's rows for one export per model (the TorchScript one where it
    exists), with the lines that follow its table (which count every row)."""
    out = outs[run]
    first, rows = {}, []
    for r in out.rows:
        first.setdefault(r["model"], r["export"])
        if r["export"] == first[r["model"]]:
            rows.append([r[h] for h in out.header])
    align = ["---:" if h in ("batch",) or "MiB" in h or h == "error" else "---" for h in out.header]
    return [source_line(run), ""] + table(out.header, rows, align) + [""] + [f"- {s}" for s in out.after]


def view_zoo(outs, run="zoo"):
    """One line per model: the spread of signed errors by step and batch, and
    the rows beyond target."""
    by_model = {}
    for row in zoo_rows(outs[run]):
        by_model.setdefault(row[0], []).append(row)
    rows = []
    for model, rs in by_model.items():
        def errs(step, big):
            return [r[5] for r in rs if r[1] == step and (r[2] >= 8) == big and r[5] is not None]
        batches = ", ".join(str(b) for b in sorted({r[2] for r in rs}))
        miss = len(beyond(rs))
        rows.append([model, batches, span(errs("training", False)), span(errs("training", True)),
                     span(errs("inference", False)), span(errs("inference", True)),
                     f"{miss} of {len(rs)}" if miss else "-"])
    head = ["model", "batches", "training, batch 1 (%)", "training, batch >= 8 (%)", "inference, batch 1 (%)",
            "inference, batch >= 8 (%)", "rows beyond target"]
    out = outs[run]
    return [source_line(run), ""] + table(head, rows, ["---", "---"] + ["---:"] * 5) + [""] + [
        f"- {s}" for s in out.after]


def view_categories(outs, runs):
    """compare.py --categories of several files as one table, one export per
    model (the TorchScript one where it exists)."""
    lines = [source_line(r) for r in runs] + [""]
    head, rows = None, []
    for run in runs:
        out = outs[run]
        head = head or out.header
        seen = {}
        for r in out.rows:
            seen.setdefault(r["model"], r["export"])
            if r["export"] == seen[r["model"]]:
                rows.append([r[h] for h in out.header])
    return lines + table(head, rows, ["---", "---", "---:"] + ["---:"] * (len(head) - 3))


def view_amp(outs, run="amp"):
    by_model = {}
    for row in amp_rows(outs[run]):
        by_model.setdefault(row[0], []).append(row)
    rows = []
    for model, rs in by_model.items():
        batches = ", ".join(str(b) for b in sorted({r[2] for r in rs}))
        miss = len(beyond(rs))
        rows.append([model, batches] + [span([r[5] for r in rs if r[4] == amp and r[5] is not None])
                                        for amp in ("bf16", "fp16")] + [f"{miss} of {len(rs)}" if miss else "-"])
    head = ["model", "batches", "bf16 (%)", "fp16 (%)", "rows beyond target"]
    return [source_line(run), ""] + table(head, rows, ["---", "---", "---:", "---:", "---:"]) + [""] + [
        f"- {s}" for s in outs[run].after]


def view_reserved(outs, run="reserved"):
    """compare_reserved.py's rows, one line per model: the reserved error at
    batch >= 8 by step, and the error of taking the allocated peak as reserved."""
    by_model = {}
    for r in outs[run].rows:
        if int(r["batch"]) >= 8:
            by_model.setdefault(r["model"], []).append(r)
    rows = []
    for model, rs in by_model.items():
        def errs(kind, col="reserved error"):
            sel = [r for r in rs if (r["step"] == "infer") == (kind == "infer")
                   and (" " in r["step"]) == (kind == "amp")]
            return [e for r in sel if (e := pct(r[col])) is not None]
        rows.append([model, span(errs("train")), span(errs("infer")), span(errs("amp")),
                     span(errs("train", "peak as reserved"))])
    head = ["model", "training (%)", "inference (%)", "training under autocast (%)",
            "allocated peak as reserved, training (%)"]
    return [source_line(run), ""] + table(head, rows, ["---"] + ["---:"] * 4)


def view_beyond(outs):
    """Every row beyond its target, rows that differ only in export and
    optimizer (or autocast dtype) gathered into one line."""
    sets = [("zoo", zoo_rows(outs["zoo"])), ("zoo", amp_rows(outs["amp"])),
            ("zoo", checkpoint_rows(outs["checkpoint"])),
            ("truth", zoo_rows(outs["truth"])), ("truth", amp_rows(outs["amp-truth"]))]
    groups = {}
    for where, rows in sets:
        for model, step, batch, export, case, err, measured in beyond(list(rows)):
            g = groups.setdefault((where, model, step, batch), ([], [], [], []))
            for values, v in ((g[0], export), (g[1], case), (g[3], float(measured))):
                if v not in values:
                    values.append(v)
            g[2].append(err)
    rows = []
    for (where, model, step, batch), (exports, cases, errs, measured) in groups.items():
        mib = (f"{min(measured):.1f}" if min(measured) == max(measured)
               else f"{min(measured):.1f} .. {max(measured):.1f}")
        rows.append([model, "shared truth" if where == "truth" else "zoo", step, batch, ", ".join(exports),
                     ", ".join(cases), mib, span(errs), len(errs)])
    head = ["model", "set", "step", "batch", "exports", "cases", "measured MiB", "error (%)", "rows"]
    return ([source_line("zoo"), source_line("checkpoint"), source_line("truth"), ""]
            + table(head, rows, ["---", "---", "---", "---:", "---", "---", "---:", "---:", "---:"]))


def view_summary(outs):
    """Medians and maxima of |error| and the rows within target, per set."""
    def line(name, file, rows, tgt):
        errs = [abs(r[5]) for r in rows if r[5] is not None]
        within5 = sum(e <= 5 for e in errs)
        within10 = sum(e <= 10 for e in errs)
        met = "-" if tgt is None else f"{within5 if tgt == 5 else within10} of {len(errs)} ({tgt:.0f}%)"
        return [name, file, len(errs), f"{upper_median(errs):.1f}%", f"{max(errs):.1f}%", within5, within10, met]

    zoo = list(zoo_rows(outs["zoo"]))
    amp = list(amp_rows(outs["amp"]))
    ckpt = list(checkpoint_rows(outs["checkpoint"]))
    truth = list(zoo_rows(outs["truth"]))
    amp_truth = list(amp_rows(outs["amp-truth"]))
    res = [(r["model"], r["step"], int(r["batch"]), r["export"], r["step"], pct(r["reserved error"]))
           for r in outs["reserved"].rows]
    cap, ck, tr = "`measured_cap_h100.json`", "`checkpoint_h100.json`", "`truth.json`"

    def sel(rows, step, big):
        return [r for r in rows if (step is None or r[1] == step) and (r[2] >= 8) == big]
    rows = [
        line("training (sgd, momentum, adam), batch >= 8", cap, sel(zoo, "training", True), 5),
        line("training, batch 1", cap, sel(zoo, "training", False), 10),
        line("inference, batch >= 8", cap, sel(zoo, "inference", True), 5),
        line("inference, batch 1", cap, sel(zoo, "inference", False), None),
        line("training under autocast (bf16, fp16), batch >= 8", cap, sel(amp, None, True), 5),
        line("training with activation checkpointing, batch >= 8", ck, sel(ckpt, None, True), 5),
        line("reserved, training, batch >= 8", cap,
             [r for r in res if r[2] >= 8 and r[1] != "infer" and " " not in r[1]], None),
        line("reserved, inference, batch >= 8", cap, [r for r in res if r[2] >= 8 and r[1] == "infer"], None),
        line("reserved, training under autocast, batch >= 8", cap, [r for r in res if r[2] >= 8 and " " in r[1]],
             None),
        line("shared truth: training, batch >= 8", tr, sel(truth, "training", True), 5),
        line("shared truth: training, batch 1", tr, sel(truth, "training", False), 10),
        line("shared truth: inference, batch >= 8", tr, sel(truth, "inference", True), 5),
        line("shared truth: training under autocast, batch >= 8", tr, sel(amp_truth, None, True), 5),
    ]
    head = ["rows (both exports)", "file", "rows", "median abs. error", "max", "within 5%", "within 10%",
            "within target"]
    return ([source_line("zoo"), source_line("checkpoint"), source_line("truth"), ""]
            + table(head, rows, ["---", "---"] + ["---:"] * 6))


def view_reserved_summary(outs):
    """compare_reserved.py --summary as it is, once its row counts are those
    of the full run (--summary leaves out a row memest failed on)."""
    full = {}
    for r in outs["reserved"].rows:
        if int(r["batch"]) >= 8 and pct(r["reserved error"]) is not None:
            kind = "infer" if r["step"] == "infer" else "amp" if " " in r["step"] else "train"
            full[kind] = full.get(kind, 0) + 1
    names = {"training (": "train", "inference": "infer", "training under": "amp"}
    for r in outs["reserved-summary"].rows:
        step = r["step, batch >= 8"]
        kind = next(k for n, k in sorted(names.items(), key=lambda x: -len(x[0])) if step.startswith(n))
        if int(r["rows"]) != full.get(kind):
            raise RuntimeError(f"reserved-summary: {r['rows']} {kind} rows, the full run has {full.get(kind)}")
    return view_raw(outs, "reserved-summary")


# key: (runs it reads, how the table is made from their outputs)
TABLES = {
    "summary": (("zoo", "amp", "checkpoint", "reserved", "truth", "amp-truth"), view_summary),
    "truth": (("truth",), lambda o: view_zoo(o, "truth")),
    "categories-truth": (("categories-truth",), lambda o: view_raw(o, "categories-truth")),
    "amp-truth": (("amp-truth",), lambda o: view_amp(o, "amp-truth")),
    "zoo": (("zoo",), view_zoo),
    "categories-zoo": (("categories-harness", "categories-rest"),
                       lambda o: view_categories(o, ("categories-harness", "categories-rest"))),
    "amp": (("amp",), view_amp),
    "checkpoint": (("checkpoint",), lambda o: view_one_export(o, "checkpoint")),
    "reserved-summary": (("reserved-summary", "reserved"), view_reserved_summary),
    "reserved": (("reserved",), view_reserved),
    "finetune": (("finetune",), lambda o: view_raw(o, "finetune", source=False)),
    **{key: ((key,), lambda o, key=key: view_raw(o, key, source=False)) for key in DIST_TABLES},
    "beyond": (("zoo", "amp", "checkpoint", "truth", "amp-truth"), view_beyond),
    "recurrent": (("recurrent",), lambda o: view_zoo(o, "recurrent")),
    "families": (("families",), lambda o: view_zoo(o, "families")),
    "blind": (("blind",), lambda o: view_zoo(o, "blind")),
    "max-batch-blind": (("max-batch-blind",), lambda o: view_raw(o, "max-batch-blind", source=False)),
    "blind3": (("blind3",), lambda o: view_zoo(o, "blind3")),
    "max-batch-blind3": (("max-batch-blind3",), lambda o: view_raw(o, "max-batch-blind3", source=False)),
    "blind4": (("blind4",), lambda o: view_zoo(o, "blind4")),
    "max-batch-blind4": (("max-batch-blind4",), lambda o: view_raw(o, "max-batch-blind4", source=False)),
    "blind5": (("blind5",), lambda o: view_zoo(o, "blind5")),
    "max-batch-blind5": (("max-batch-blind5",), lambda o: view_raw(o, "max-batch-blind5", source=False)),
    "max-batch-h100": (("max-batch-h100",), lambda o: view_raw(o, "max-batch-h100", source=False)),
    "max-batch-h200": (("max-batch-h200",), lambda o: view_raw(o, "max-batch-h200", source=False)),
    "time-h100": (("time-h100",), lambda o: view_raw(o, "time-h100")),
    "time-h200": (("time-h200",), lambda o: view_raw(o, "time-h200")),
    "time-ops-h100": (("time-ops-h100",), lambda o: view_raw(o, "time-ops-h100")),
}


def run(memest, key):
    """(output, None) or (None, why not)."""
    script, args, measured, onnx = RUNS[key]
    for need in (measured, onnx):
        if need and not os.path.exists(need):
            return None, f"missing {rel(need)}"
    out = subprocess.run([sys.executable, os.path.join(HERE, script), "--memest", memest, *args],
                         capture_output=True, text=True)
    if out.returncode:
        return None, f"{script} failed: {out.stderr.strip()[-300:]}"
    parsed = Output(out.stdout)
    bad = parsed.failures("--categories" in args)
    if bad:
        return None, f"memest failed on {len(bad)} rows, first: {bad[0][:300]}"
    return parsed, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memest", default="build/cli/memest")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--only", default="", help="KEY,... of the tables to remake (default: all)")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    unknown = only - set(TABLES)
    if unknown:
        ap.error(f"no table {', '.join(sorted(unknown))} (one of {', '.join(TABLES)})")
    memest = os.path.abspath(a.memest)
    path = os.path.join(ROOT, "docs", "accuracy.md")
    text = open(path).read()
    tables = {k: v for k, v in TABLES.items() if not only or k in only}
    needed = sorted({r for runs, _ in tables.values() for r in runs})
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = dict(zip(needed, pool.map(lambda k: run(memest, k), needed)))
    outs = {k: v[0] for k, v in results.items() if v[0] is not None}
    for k, (_, why) in results.items():
        if why:
            print(f"regen_docs: run {k}: {why}", file=sys.stderr)
    changed, failed = [], []
    for key, (runs, make) in tables.items():
        pat = re.compile(rf"(^<!-- BEGIN generated: {re.escape(key)} -->\n)(.*?)(\n<!-- END generated: {re.escape(key)} -->$)",
                         re.S | re.M)
        m = pat.search(text)
        if not m:
            print(f"regen_docs: no markers for {key} in docs/accuracy.md", file=sys.stderr)
            failed.append(key)
            continue
        if any(r not in outs for r in runs):
            print(f"regen_docs: {key}: left as it is (run {', '.join(r for r in runs if r not in outs)} failed)",
                  file=sys.stderr)
            failed.append(key)
            continue
        try:
            generated = "\n".join(make(outs)).strip()
        except (RuntimeError, KeyError, ValueError) as e:
            print(f"regen_docs: {key}: left as it is ({e})", file=sys.stderr)
            failed.append(key)
            continue
        if generated == m.group(2).strip():
            continue
        changed.append(key)
        text = text[:m.start(2)] + generated + text[m.end(2):]
    for key in re.findall(r"^<!-- BEGIN generated: (\S+) -->$", text, re.M):
        if key not in TABLES:
            print(f"regen_docs: docs/accuracy.md has a table {key} that no entry of TABLES makes", file=sys.stderr)
            failed.append(key)
    if a.check:
        print("changed: " + (", ".join(changed) or "none") + (f"; not made: {', '.join(failed)}" if failed else ""))
        return 1 if changed or failed else 0
    if changed:
        open(path, "w").write(text)
    print("regenerated: " + (", ".join(changed) or "none") + (f"; not made: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
