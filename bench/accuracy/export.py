#!/usr/bin/env python3
"""Export the zoo's models to ONNX the four ways ../shared/truth/README.md names.

usage: export.py [--keep-ints] [--only-train] OUT_DIR [MODEL ...]

Writes OUT_DIR/<model>.<export>.onnx for export in legacy, legacy-train,
dynamo, dynamo-train. As in the truth, initializers of 1 KiB or more go to
external data that is then deleted: memest needs only their names, dtypes and
dims. Runs on a CPU. A failed export is reported and skipped.

--keep-ints keeps the integer initializers in the file (index buffers such
as Swin's relative_position_index, dynamo's folded position ids): `memest
verify` runs the graph and needs their values, where random floats stand in
for the weights. --only-train writes the two training exports alone.
"""
import os
import sys
import traceback

import onnx
import torch

import zoo

EXPORT_BATCH = 2  # torch.export specialises sizes 0 and 1


FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE)


def strip_weights(path, keep_ints=False):
    model = onnx.load(path)
    weights = os.path.basename(path) + ".weights"
    if not keep_ints:
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location=weights,
                        size_threshold=1024)
    else:
        from onnx.external_data_helper import set_external_data, write_external_data_tensors
        for t in model.graph.initializer:
            if t.data_type in FLOATS and len(t.raw_data) >= 1024:
                set_external_data(t, weights)
        write_external_data_tensors(model, os.path.dirname(path) or ".")
        onnx.save_model(model, path)
    if os.path.exists(os.path.join(os.path.dirname(path), weights)):
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
    args = sys.argv[1:]
    keep_ints = "--keep-ints" in args
    only_train = "--only-train" in args
    args = [a for a in args if a not in ("--keep-ints", "--only-train")]
    out = args[0]
    names = args[1:] or list(zoo.MODELS)
    os.makedirs(out, exist_ok=True)
    failed = 0
    for name in names:
        x = zoo.make_input(name, EXPORT_BATCH)
        for export, fn, train in (("legacy", export_legacy, False), ("legacy-train", export_legacy, True),
                                  ("dynamo", export_dynamo, False), ("dynamo-train", export_dynamo, True)):
            path = os.path.join(out, f"{name}.{export}.onnx")
            if os.path.exists(path) or (only_train and not train):
                continue
            try:
                fn(zoo.build(name), x, path, train)
                strip_weights(path, keep_ints)
                print(f"exported {path}", flush=True)
            except Exception:
                failed += 1
                print(f"FAILED {path}\n{traceback.format_exc(limit=3)}", flush=True)
                if os.path.exists(path):
                    os.remove(path)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
