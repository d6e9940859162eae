"""The Python API against the CLI: the same options give the same JSON, byte
for byte; a graph is loaded once; failures raise memest.Error."""
import json
import os
import shutil
import sys
import threading

import pytest

import memest

RESNET = "resnet18.onnx"

# (Graph.estimate's keywords, the CLI's flags) that must report the same.
CASES = [
    (dict(batch=32), ["--batch", "32"]),
    (dict(batch=8, mode="infer"), ["--batch", "8", "--mode", "infer"]),
    (dict(batch=8, optimizer="sgd", checkpoint="every=1", gpu_memory="8GiB"),
     ["--batch", "8", "--optimizer", "sgd", "--checkpoint", "every=1", "--gpu-memory", "8GiB"]),
    (dict(batch=8, checkpoint=["layer1", "layer2"]), ["--batch", "8", "--checkpoint", "layer1,layer2"]),
    (dict(batch=8, gpu="A100-40GB", host_us=(10, 1, 20, 2, 3), depth=2),
     ["--batch", "8", "--gpu", "A100-40GB", "--host-us", "10,1,20,2,3", "--depth", "2"]),
    (dict(batch=8, world_size=4, strategy="fsdp", amp="bf16"),
     ["--batch", "8", "--world-size", "4", "--strategy", "fsdp", "--amp", "bf16"]),
    (dict(batch=8, strategy="ddp", ddp_first_bucket="held"),
     ["--batch", "8", "--strategy", "ddp", "--ddp-first-bucket", "held"]),
    (dict(batch=8, world_size=4, strategy="zero1", rank=2),
     ["--batch", "8", "--world-size", "4", "--strategy", "zero1", "--rank", "2"]),
    (dict(batch=8, trainable="fc.", freeze=["fc.bias"], grad_accum=4),
     ["--batch", "8", "--trainable", "fc.", "--freeze", "fc.bias", "--grad-accum", "4"]),
    (dict(batch=4, timeline=True, dtype="bfloat16"), ["--batch", "4", "--timeline", "--dtype", "bfloat16"]),
    (dict(input_shapes={"input": "batchx3x64x64"}, batch=2), ["--input-shape", "input=batchx3x64x64", "--batch", "2"]),
]


@pytest.fixture(scope="module")
def resnet(models):
    return memest.load(os.path.join(models, RESNET))


@pytest.mark.parametrize("kwargs,flags", CASES)
def test_estimate_equals_cli_json(resnet, cli, models, kwargs, flags):
    report = resnet.estimate(**kwargs)
    text = cli(os.path.join(models, RESNET), *flags, "--format", "json")
    assert report.to_json() == text
    assert report.to_dict() == json.loads(text)
    assert report.peak_bytes == json.loads(text)["peak"]["bytes"]


def test_attributes_mirror_json(resnet):
    r = resnet.estimate(batch=32)
    d = r.to_dict()
    assert r.model == d["model"] and r.batch == 32 and r.dims == d["dims"]
    assert r.totals == d["totals"] and r.peak == d["peak"] and len(r.layers) == d["totals"]["layer_count"]
    assert r.reserved_bytes == d["totals"]["reserved_bytes"]
    assert "846.19 MiB" in repr(r)
    with pytest.raises(AttributeError):
        r.no_such_member


def test_dims_and_input_names(cli, models):
    g = memest.load(os.path.join(models, "transformer_block.json"))
    assert g.inputs == ("x",)
    r = g.estimate(batch=2, dims={"seq": 128}, world_size=2, tp=2)
    text = cli(os.path.join(models, "transformer_block.json"), "--batch", "2", "--dim", "seq=128",
               "--world-size", "2", "--tp", "2", "--format", "json")
    assert r.to_json() == text


def test_max_batch_equals_cli(resnet, cli, models):
    mb = resnet.max_batch(gpu="T4")
    text = cli(os.path.join(models, RESNET), "--max-batch", "--gpu", "T4", "--format", "json")
    assert mb.to_json() == text
    assert mb.batch == json.loads(text)["max_batch"]["batch"] > 0
    assert mb.next_batch == mb.batch + 1


def test_sweep_equals_cli(resnet, cli, models):
    sw = resnet.sweep("batch", [1, 8, 64], gpu="T4")
    text = cli(os.path.join(models, RESNET), "--sweep", "batch=1,8,64", "--gpu", "T4", "--format", "json")
    assert sw.to_json() == text and sw.to_dict() == json.loads(text)
    assert [p["value"] for p in sw] == [1, 8, 64] and len(sw) == 3
    g = memest.load(os.path.join(models, "transformer_block.json"))
    sw = g.sweep("seq", [64, 128], batch=2, gpu="T4")
    text = cli(os.path.join(models, "transformer_block.json"), "--batch", "2", "--sweep", "seq=64,128", "--gpu", "T4",
               "--format", "json")
    assert sw.to_json() == text


def test_reestimated_never_reparsed(models, tmp_path):
    """The file can go once loaded: every estimate runs on the loaded graph."""
    path = tmp_path / "m.onnx"
    shutil.copy(os.path.join(models, RESNET), path)
    g = memest.load(path)
    os.remove(path)
    peaks = [g.estimate(batch=b).peak_bytes for b in (1, 2, 4, 8)]
    assert peaks == sorted(peaks) and len(set(peaks)) == 4
    assert g.max_batch(gpu_memory="4GiB").batch > 8


def test_threads_share_a_graph(resnet):
    want = {b: resnet.estimate(batch=b).peak_bytes for b in (1, 3, 5, 7)}
    got = {}

    def run(b):
        got[b] = resnet.estimate(batch=b).peak_bytes

    threads = [threading.Thread(target=run, args=(b,)) for b in want]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == want


@pytest.mark.parametrize("kwargs,code", [
    (dict(mode="bogus"), "EINVAL"),
    (dict(optimizer="lion"), "EINVAL"),
    (dict(dtype="int8"), "EINVAL"),
    (dict(gpu="no-such-gpu"), "EINVAL"),
    (dict(gpu_memory="lots"), "EINVAL"),
    (dict(checkpoint="every=x"), "EINVAL"),
    (dict(trainable="no_such_parameter"), "EINVAL"),
    (dict(mode="infer", grad_accum=2), "EINVAL"),
    (dict(world_size=4, strategy="hsdp", shard_group=3), "EINVAL"),
    (dict(dims={"batch": -1}), "EINVAL"),
    (dict(batch=1 << 50), "EINVAL"),
])
def test_bad_options_raise(resnet, kwargs, code):
    kwargs.setdefault("batch", 2)
    with pytest.raises(memest.Error) as e:
        resnet.estimate(**kwargs)
    assert e.value.code == code and e.value.status == memest._memest.STATUS[code] and e.value.message


def test_load_errors(tmp_path, models):
    with pytest.raises(memest.Error) as e:
        memest.load(tmp_path / "missing.onnx")
    assert e.value.code == "EIO" and "missing.onnx" in str(e.value)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07\x12\xff\xff garbage")
    with pytest.raises(memest.Error) as e:
        memest.load(bad)
    assert e.value.code in ("EPARSE", "EGRAPH")


def test_unbound_dim_raises(models):
    g = memest.load(os.path.join(models, "transformer_block.json"))
    with pytest.raises(memest.Error) as e:
        g.estimate(batch=2)
    assert e.value.code == "EUNBOUND" and "seq" in e.value.message
    with pytest.raises(memest.Error) as e:
        g.sweep("seq", [8, 16])  # batch unbound at each point
    assert e.value.code == "EUNBOUND" and e.value.message.startswith("seq=8: ")


def test_capacity_needs_a_gpu(resnet):
    with pytest.raises(memest.Error):
        resnet.max_batch()
    with pytest.raises(memest.Error):
        resnet.max_batch(gpu="T4", batch=4)
    with pytest.raises(TypeError):
        resnet.max_batch(gpu="T4", no_such_option=1)
    with pytest.raises(TypeError):
        resnet.estimate(batch="many")


def test_graph_facts(resnet):
    assert resnet.node_count > 0 and resnet.opset > 0 and resnet.dtype == "float32"
    assert resnet.inputs == ("input",)
    assert len(resnet.parameters) == 62 and all(len(p) == 2 for p in resnet.parameters)
    assert "H100-80GB" in memest.gpus()


def test_dataframe(resnet):
    pandas = pytest.importorskip("pandas")
    r = resnet.estimate(batch=4)
    df = r.to_dataframe()
    assert isinstance(df, pandas.DataFrame) and len(df) == len(r.layers) and "flops_forward" in df.columns
    assert list(df["name"]) == [layer["name"] for layer in r.layers]
    assert df["flops_forward"].sum() == r.totals["flops_forward"]
    assert df["output_shapes"][0] == [[4, 64, 112, 112]] and "inputs" not in df.columns
    sw = resnet.sweep("batch", [1, 8], gpu="T4").to_dataframe()
    assert list(sw["value"]) == [1, 8] and list(sw["fits"]) == [True, True]


def test_dataframe_without_pandas(resnet, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas fails
    with pytest.raises(ImportError, match="pip install pandas"):
        resnet.estimate(batch=1).to_dataframe()
    with pytest.raises(ImportError, match="pip install pandas"):
        resnet.sweep("batch", [1], gpu="T4").to_dataframe()
