"""Bad arguments, through the API and straight to the C extension: each
raises memest.Error, TypeError or ValueError (never OverflowError, a crash
or a leak), and the graph estimates as before afterwards."""
import gc
import json
import os
import subprocess
import sys
import tracemalloc

import pytest

import memest
from memest import _memest

RESNET = "resnet18.onnx"


@pytest.fixture(scope="module")
def resnet(models):
    return memest.load(os.path.join(models, RESNET))


# (Graph.estimate's keywords, the exception, its code when memest.Error)
ESTIMATE = [
    (dict(batch=1 << 70), memest.Error, "EINVAL"),
    (dict(batch=-3), memest.Error, "EINVAL"),
    (dict(batch=2.5), TypeError, None),
    (dict(batch="many"), TypeError, None),
    (dict(dims={1: 2}), TypeError, None),
    (dict(dims={"batch": 1 << 70}), memest.Error, "EINVAL"),
    (dict(dims={"batch": "5"}), TypeError, None),
    (dict(dims={"batch": None}), memest.Error, "EINVAL"),
    (dict(dims=[1, 2]), TypeError, None),
    (dict(input_shapes={3: [1, 2]}), TypeError, None),
    (dict(input_shapes={"input": [2, 2.5]}), TypeError, None),
    (dict(input_shapes={"input": [2, -3]}), memest.Error, "EINVAL"),
    (dict(input_shapes={"input": [1 << 70]}), memest.Error, "EINVAL"),
    (dict(input_shapes={"input": 5}), TypeError, None),
    (dict(input_shapes={"nope": [1, 3, 8, 8]}), memest.Error, "EINVAL"),
    (dict(mode=None), TypeError, None),
    (dict(optimizer=3), TypeError, None),
    (dict(mode="tr\0ain"), ValueError, None),
    (dict(gpu=3), memest.Error, "EINVAL"),
    (dict(gpu="x" + "\u00e9" * 400), memest.Error, "EINVAL"),  # its message cut inside a character
    (dict(gpu_memory=-1), memest.Error, "EINVAL"),
    (dict(gpu_memory=1 << 70), memest.Error, "EINVAL"),
    (dict(gpu="T4", reserve=-1), memest.Error, "EINVAL"),
    (dict(gpu="T4", reserve=1 << 70), memest.Error, "EINVAL"),
    (dict(reserve="1GiB"), memest.Error, "EINVAL"),  # a reserve needs a GPU
    (dict(world_size=2, strategy="ddp", bucket_mb=1 << 44), memest.Error, "EINVAL"),
    (dict(world_size=1 << 62, strategy="ddp"), memest.Error, "EINVAL"),
    (dict(world_size=2, strategy="ddp", ddp_first_bucket="sometimes"), memest.Error, "EINVAL"),
    (dict(world_size=2, strategy="fsdp", ddp_first_bucket="held"), memest.Error, "EINVAL"),
    (dict(world_size=2, strategy="zero1", rank=2), memest.Error, "EINVAL"),
    (dict(world_size=2, strategy="zero1", rank=-1), memest.Error, "EINVAL"),
    (dict(tp=-2), memest.Error, "EINVAL"),
    (dict(depth=1 << 40), memest.Error, "EINVAL"),
    (dict(grad_accum=1 << 70), memest.Error, "EINVAL"),
    (dict(checkpoint=1 << 70), memest.Error, "EINVAL"),
    (dict(checkpoint=-1), memest.Error, "EINVAL"),
    (dict(checkpoint=1.5), TypeError, None),
    (dict(freeze=5), TypeError, None),
    (dict(gpu="T4", host_us=(1, 2)), memest.Error, "EINVAL"),
    (dict(gpu="T4", host_us=(1, 2, 3, 4, "x")), TypeError, None),
    (dict(gpu="T4", host_us=(1, 2, 3, 4, float("nan"))), memest.Error, "EINVAL"),
    (dict(gpu="T4", host_us=(1, 2, 3, 4, -5)), memest.Error, "EINVAL"),
    (dict(no_such_option=1), TypeError, None),
]


@pytest.mark.parametrize("kwargs,exc,code", ESTIMATE)
def test_bad_estimate_arguments(resnet, kwargs, exc, code):
    kwargs.setdefault("batch", 2)
    with pytest.raises(exc) as e:
        resnet.estimate(**kwargs)
    if code:
        assert e.value.code == code and e.value.message
    assert not isinstance(e.value, OverflowError)


# Straight to the extension (memest._memest.Graph), past __init__.py's checks.
RAW = [
    (lambda g: g.estimate(2), TypeError),  # every option is a keyword
    (lambda g: g.max_batch(5, gpu="T4"), TypeError),
    (lambda g: g.max_batch(gpu="T4", cap=1 << 70), memest.Error),
    (lambda g: g.max_batch(gpu="T4", cap="x"), TypeError),
    (lambda g: g.sweep("batch", [], gpu="T4"), memest.Error),
    (lambda g: g.sweep("batch", [1.5], gpu="T4"), TypeError),
    (lambda g: g.sweep("batch", [1 << 70], gpu="T4"), memest.Error),
    (lambda g: g.sweep("batch", [None], gpu="T4"), memest.Error),
    (lambda g: g.sweep("batch", None, gpu="T4"), TypeError),
    (lambda g: g.sweep(None, [1], gpu="T4"), TypeError),
    (lambda g: g.estimate(batch=2, dims=BadItems()), TypeError),
    (lambda g: g.estimate(batch=2, dims="batch=2"), TypeError),
    (lambda g: g.estimate(batch=2, input_shapes=BadItems()), TypeError),
    (lambda g: g.estimate(batch=2, input_shapes={"input": "2x3x8x8"}), TypeError),
    (lambda g: g.estimate(batch=2, trainable="fc."), TypeError),  # a str is not a list of patterns
    (lambda g: g.estimate(batch=2, trainable=[None]), TypeError),
    (lambda g: g.estimate(batch=2, checkpoint=[3]), TypeError),
    (lambda g: g.estimate(batch=2, gpu="T4", host_us="12345"), memest.Error),
    (lambda g: g.estimate(batch=2, gpu="T4", host_us=5), memest.Error),
    (lambda g: _memest.default_reserve(-1), memest.Error),
    (lambda g: _memest.default_reserve(1 << 30, 2, "bogus"), memest.Error),
    (lambda g: _memest.Graph(), TypeError),
]


class BadItems:
    """A mapping whose items() are not (key, value) pairs."""

    def items(self):
        return [1, 2]

    def keys(self):
        return []

    def __getitem__(self, key):
        return 0


@pytest.mark.parametrize("call,exc", RAW)
def test_bad_extension_arguments(resnet, call, exc):
    with pytest.raises(exc):
        call(resnet._g)


def test_raw_sequences_are_copied(resnet):
    """Shapes, patterns and host costs may be any sequence, generators
    included, and their items need not be cached small ints."""
    want = resnet._g.estimate(input_shapes={"input": [2, 3, 300, 300]}, gpu="T4", host_us=(1, 2, 3, 4, 5),
                              trainable=("fc.",))
    fresh = (d + 0 for d in (2, 3, 300, 300))  # ints made as they are read, held by nothing else
    got = resnet._g.estimate(input_shapes={"input": fresh}, gpu="T4", host_us=[1, 2, 3, 4, 5],
                             trainable=iter(["fc."]))
    assert got == want


def test_load_bad_paths(tmp_path):
    for path in (None, 3, b"\xff" * 0):
        with pytest.raises((TypeError, memest.Error)):
            memest.load(path)
    with pytest.raises(ValueError):
        memest.load("a\0b")
    for path in ("", tmp_path, tmp_path / "missing" / "m.onnx"):
        with pytest.raises(memest.Error) as e:
            memest.load(path)
        assert e.value.code == "EIO"
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(memest.Error):
        memest.load(empty)


def test_graph_works_after_errors(models):
    g = memest.load(os.path.join(models, RESNET))
    want = g.estimate(batch=32).to_json()
    for kwargs, exc, _ in ESTIMATE:
        with pytest.raises(exc):
            g.estimate(**dict(dict(batch=2), **kwargs))
        with pytest.raises(memest.Error):
            g.estimate()  # batch unbound
    with pytest.raises(memest.Error):
        g.max_batch(gpu_memory="1MiB", mode="bogus")
    with pytest.raises(memest.Error):
        g.sweep("seq", [1], gpu="T4")
    assert g.estimate(batch=32).to_json() == want
    assert g.max_batch(gpu="T4").batch > 0


def test_names_that_are_not_utf8(models, tmp_path, cli_path):
    """A model's names are its bytes: a byte that is not UTF-8 becomes
    U+FFFD in the JSON (RFC 8259 asks for UTF-8), and the report's text
    is the CLI's, byte for byte, valid UTF-8."""
    data = open(os.path.join(models, "mlp.onnx"), "rb").read()
    assert data.count(b"node_Reshape_9") == 1
    path = tmp_path / "names.onnx"
    path.write_bytes(data.replace(b"node_Reshape_9", b"node_Reshap\xff_9"))
    r = memest.load(path).estimate(batch=2)
    assert r.layers[0]["name"] == "node_Reshap\ufffd_9"
    text = subprocess.run([cli_path, str(path), "--batch", "2", "--format", "json"], check=True,
                          capture_output=True).stdout
    assert r.to_json().encode("utf-8") == text
    assert json.loads(text.decode("utf-8"))["layers"][0]["name"] == "node_Reshap\ufffd_9"


def test_failures_do_not_leak(resnet):
    """Every failing call, many times over: Python's memory stays flat (a
    reference or PyMem block kept per call would add up)."""

    def round_of_failures():
        for kwargs, exc, _ in ESTIMATE:
            try:
                resnet.estimate(**dict(dict(batch=2), **kwargs))
            except (memest.Error, TypeError, ValueError):
                pass
        for call, exc in RAW:
            try:
                call(resnet._g)
            except (memest.Error, TypeError, ValueError):
                pass

    for _ in range(3):
        round_of_failures()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(40):
            round_of_failures()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # 40 rounds of ~60 calls: one leaked object per call would be > 100 KB
    assert grown < 20000, f"{grown} bytes more after 40 rounds of failing calls"


def test_failures_keep_no_reference(resnet):
    """The arguments of failing calls have the references they had before:
    the extension drops every one it took."""
    big, neg, names, shape, dims, host, values = 1 << 70, -(1 << 40), ["fc.", None], [2, 3.5], {"batch": 1 << 70}, \
        (1, 2), [2, 1 << 70]
    g = resnet._g
    calls = [
        lambda: g.estimate(batch=big), lambda: g.estimate(batch=neg), lambda: g.estimate(depth=big),
        lambda: g.estimate(batch=2, gpu_memory=neg), lambda: g.estimate(batch=2, gpu="T4", reserve=big),
        lambda: g.estimate(batch=2, trainable=names), lambda: g.estimate(batch=2, freeze=names),
        lambda: g.estimate(batch=2, checkpoint=names), lambda: g.estimate(batch=2, input_shapes={"input": shape}),
        lambda: g.estimate(dims=dims), lambda: g.estimate(batch=2, gpu="T4", host_us=host),
        lambda: g.sweep("batch", values, gpu="T4"), lambda: g.max_batch(gpu="T4", cap=big),
    ]
    objects = [big, neg, names, shape, dims, host, values]
    before = [sys.getrefcount(o) for o in objects]
    for _ in range(50):
        for call in calls:
            try:
                call()
            except (memest.Error, TypeError, ValueError):
                pass
            else:
                pytest.fail("a bad call did not raise")
    assert [sys.getrefcount(o) for o in objects] == before
