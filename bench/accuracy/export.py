#!/usr/bin/env python3
"""Export the zoo's models to ONNX the four ways ../shared/truth/README.md names.

usage: export.py OUT_DIR [MODEL ...]

Writes OUT_DIR/<model>.<export>.onnx for export in legacy, legacy-train,
dynamo, dynamo-train. As in the truth, initializers of 1 KiB or more go to
external data that is then deleted: memest needs only their names, dtypes and
dims. Runs on a CPU. A failed export is reported and skipped.
"""
import os
import sys
import traceback

import onnx
import torch

import zoo

EXPORT_BATCH = 2  # torch.export specialises sizes 0 and 1


def strip_weights(path):
    model = onnx.load(path)
    weights = os.path.basename(path) + ".weights"
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location=weights,
                    size_threshold=1024)
    os.remove(os.path.join(os.path.dirname(path), weights))


def export_legacy(model, x, path, train):
    model.train(train)
    mode = torch.onnx.TrainingMode.TRAINING if train else torch.onnx.TrainingMode.EVAL
    torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17, training=mode,
                      do_constant_folding=not train, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})


def export_dynamo(model, x, path, train):
    model.train(train)
    batch = torch.export.Dim("batch")
    prog = torch.onnx.export(model, (x,), dynamo=True, opset_version=20, input_names=["input"],
                             output_names=["output"], dynamic_shapes=({0: batch},))
    prog.save(path)


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or list(zoo.MODELS)
    os.makedirs(out, exist_ok=True)
    failed = 0
    for name in names:
        x = zoo.make_input(name, EXPORT_BATCH)
        for export, fn, train in (("legacy", export_legacy, False), ("legacy-train", export_legacy, True),
                                  ("dynamo", export_dynamo, False), ("dynamo-train", export_dynamo, True)):
            path = os.path.join(out, f"{name}.{export}.onnx")
            if os.path.exists(path):
                continue
            try:
                fn(zoo.build(name), x, path, train)
                strip_weights(path)
                print(f"exported {path}", flush=True)
            except Exception:
                failed += 1
                print(f"FAILED {path}\n{traceback.format_exc(limit=3)}", flush=True)
                if os.path.exists(path):
                    os.remove(path)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
