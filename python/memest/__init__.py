"""memest from Python: how much GPU memory and how many FLOPs a model needs.

A graph is loaded once and estimated as often as you like; each estimate is
the library's, and its report is exactly what ``memest --format json``
prints (``Report.to_dict()``, ``Report.to_json()``)::

    import memest

    g = memest.load("models/resnet18.onnx")
    r = g.estimate(batch=32)
    print(r.peak["bytes"], r.peak["phase"], r.peak["layer"])
    print(g.max_batch(gpu="T4").batch)

Every failure raises :class:`memest.Error`, with the library's message and
code. The options are the CLI's flags (``memest --help``,
docs/python.md).
"""
from __future__ import annotations

import json
import operator
import os
import tempfile
import warnings
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _memest

__all__ = ["Error", "Graph", "Report", "MaxBatch", "Sweep", "load", "from_torch", "gpus", "__version__"]

__version__: str = _memest.LIBRARY_VERSION

Dim = Union[int, str]
Checkpoint = Union[int, str, Sequence[str], None]
Patterns = Union[str, Sequence[str], None]
Size = Union[int, str, None]


class Error(Exception):
    """A failure of the library or of an option: ``message`` as the library
    words it (the file, the node and the reason), ``code`` its est_status
    name (``"EUNBOUND"``, ``"EINVAL"``, ...) and ``status`` its number."""

    def __init__(self, message: str, code: str = "EINVAL", status: Optional[int] = None) -> None:
        super().__init__(message)
        self.message: str = message
        self.code: str = code
        self.status: int = _memest.STATUS.get(code, -1) if status is None else status

    def __repr__(self) -> str:
        return f"memest.Error({self.message!r}, code={self.code!r})"


_memest._set_error_class(Error)


def _human_bytes(n: int) -> str:
    """``"1.50 MiB"``, as the CLI's table writes sizes."""
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    v, u = float(n), 0
    while v >= 1024.0 and u < 5:
        v /= 1024.0
        u += 1
    return f"{n} B" if u == 0 else f"{v:.2f} {units[u]}"


_SIZE_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
               "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}


def _size(value: Size, what: str) -> Optional[int]:
    """A memory size: bytes, or a string such as ``"24GiB"`` or ``"80GB"``
    (the units ``--gpu-memory`` takes)."""
    if value is None or isinstance(value, int):
        return value
    s = str(value).strip()
    i = len(s)
    while i and not (s[i - 1].isdigit() or s[i - 1] == "."):
        i -= 1
    unit = _SIZE_UNITS.get(s[i:].strip().lower())
    try:
        number = float(s[:i])
    except ValueError:
        number = -1.0
    if unit is None or number < 0:
        raise Error(f"{what} wants a size such as 24GiB, 80GB, 16000MiB or a number of bytes, got '{value}'")
    return int(number * unit)


def _patterns(value: Patterns) -> Optional[List[str]]:
    """``"a,b"`` or ``["a", "b"]`` as a list, as ``--trainable a,b`` splits."""
    if value is None:
        return None
    return value.split(",") if isinstance(value, str) else [str(v) for v in value]


def _checkpoint(value: Checkpoint) -> Union[int, List[str], None]:
    """``1``, ``"every=1"``, ``"layer3,layer4"`` or a list of prefixes."""
    if isinstance(value, str) and value.startswith("every="):
        try:
            return int(value[6:])
        except ValueError:
            raise Error(f"checkpoint every=N wants a positive N, got '{value}'") from None
    if isinstance(value, bool):
        raise Error("checkpoint wants every=N, N or module prefixes")
    return value if isinstance(value, int) or value is None else _patterns(value)


def _shape(value: Union[str, Sequence[Dim]]) -> List[Dim]:
    """``"batchx3x224x224"`` (or with commas) or a list of sizes and names."""
    if not isinstance(value, str):
        return list(value)
    parts = value.split("," if "," in value else "x")
    return [int(p) if p.isdigit() else p for p in parts]


def _options(batch: Optional[int], dims: Optional[Mapping[str, int]],
             input_shapes: Optional[Mapping[str, Union[str, Sequence[Dim]]]], mode: str, optimizer: str,
             dtype: Optional[str], amp: Optional[str], checkpoint: Checkpoint, trainable: Patterns,
             freeze: Patterns, grad_accum: int, world_size: int, strategy: Optional[str],
             shard_group: Optional[int], bucket_mb: Optional[int], grad_as_bucket_view: bool, offload: bool,
             tp: int, sequence_parallel: bool, ddp_first_bucket: str, rank: Optional[int], kernels: str, gpu: Optional[str], gpu_memory: Size,
             reserve: Size, host_us: Optional[Sequence[float]]) -> Dict[str, Any]:
    """The keyword options of the C extension, from Graph's arguments."""
    if gpu is not None and not isinstance(gpu, str):
        raise Error("gpu wants a name such as 'H100-80GB' (or give gpu_memory)")
    opt: Dict[str, Any] = dict(
        batch=batch or 0, dims=dict(dims) if dims else None, mode=mode, optimizer=optimizer, dtype=dtype,
        amp=None if amp in (None, "none", "off") else amp, checkpoint=_checkpoint(checkpoint),
        trainable=_patterns(trainable), freeze=_patterns(freeze), grad_accum=grad_accum or 0,
        world_size=world_size or 0, strategy=strategy, shard_group=shard_group or 0, bucket_mb=bucket_mb or 0,
        grad_as_bucket_view=bool(grad_as_bucket_view), offload=bool(offload), tp=tp or 0,
        sequence_parallel=bool(sequence_parallel), ddp_first_bucket=ddp_first_bucket, rank=rank, kernels=kernels,
        gpu=gpu,
        gpu_memory=_size(gpu_memory, "gpu_memory") or 0, reserve=_size(reserve, "reserve"),
        host_us=tuple(host_us) if host_us is not None else None)
    if input_shapes:
        opt["input_shapes"] = {name: _shape(s) for name, s in input_shapes.items()}
    return opt


class Report:
    """One estimate: the JSON report of ``memest --format json``.

    Each top-level member of the JSON is an attribute (``model``, ``mode``,
    ``batch``, ``dims``, ``layers``, ``parameters``, ``outputs``, ``totals``,
    ``peak``, ``snapshots``, ``fit``, ``time``, ...; docs/output-format.md);
    ``peak_bytes`` and ``reserved_bytes`` are the two headline figures."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._data: Dict[str, Any] = json.loads(text)

    def to_dict(self) -> Dict[str, Any]:
        """A fresh copy of the report: equal to ``json.loads`` of the CLI's
        ``--format json`` output for the same options."""
        return json.loads(self._text)

    def to_json(self) -> str:
        """The report's text, byte for byte what ``memest --format json``
        prints (with its final newline)."""
        return self._text

    def to_dataframe(self) -> Any:
        """The layers as a pandas DataFrame, one row per layer (needs
        pandas)."""
        try:
            import pandas
        except ImportError:
            raise ImportError("Report.to_dataframe() needs pandas (pip install pandas)") from None
        rows = []
        for layer in self._data.get("layers", []):
            row = {k: v for k, v in layer.items() if k not in ("inputs", "outputs")}
            row["output_shapes"] = [o["shape"] for o in layer["outputs"]]
            rows.append(row)
        return pandas.DataFrame(rows)

    @property
    def peak_bytes(self) -> int:
        """The simulated peak of allocated memory (``peak.bytes``)."""
        return int(self._data["peak"]["bytes"])

    @property
    def reserved_bytes(self) -> int:
        """The caching allocator's predicted reserve (``totals.reserved_bytes``)."""
        return int(self._data["totals"]["reserved_bytes"])

    def __getattr__(self, name: str) -> Any:
        data = self.__dict__.get("_data")
        if data is not None and name in data:
            return data[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | set(self._data))

    def __repr__(self) -> str:
        peak = self._data.get("peak") or {}
        where = f" during {peak.get('phase')}" if peak else ""
        return f"<memest.Report {self._data.get('model')!r} batch={self._data.get('batch')} " \
               f"peak={_human_bytes(int(peak.get('bytes', 0)))}{where}>"

    # The JSON's members, typed (any other member is reached as an attribute too).
    model: str
    mode: str
    optimizer: Optional[str]
    dtype: str
    batch: Optional[int]
    dims: Dict[str, int]
    layers: List[Dict[str, Any]]
    parameters: List[Dict[str, Any]]
    outputs: List[Dict[str, Any]]
    totals: Dict[str, int]
    peak: Dict[str, Any]


class MaxBatch(Report):
    """``memest --max-batch --format json``: the report at the largest batch
    that fits (batch 1 when none does), and ``max_batch``, the answer."""

    @property
    def batch(self) -> int:  # type: ignore[override]
        """The largest batch that fits; 0 when batch 1 does not."""
        return int(self._data["max_batch"]["batch"])

    @property
    def next_batch(self) -> Optional[int]:
        """The smallest batch that does not fit; None when every batch up to
        the search cap fits."""
        return self._data["max_batch"]["next_batch"]


class Sweep:
    """``memest --sweep DIM=V1,V2,... --format json``: one point per value."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._data: Dict[str, Any] = json.loads(text)

    @property
    def points(self) -> List[Dict[str, Any]]:
        """Each value's figures (``dim``, ``value``, ``peak_bytes``, ...)."""
        return self._data["sweep"]

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        return iter(self.points)

    def __len__(self) -> int:
        return len(self.points)

    def to_dict(self) -> Dict[str, Any]:
        """A fresh copy, equal to the CLI's ``--sweep ... --format json``."""
        return json.loads(self._text)

    def to_json(self) -> str:
        """The text the CLI prints, byte for byte."""
        return self._text

    def to_dataframe(self) -> Any:
        """The points as a pandas DataFrame (needs pandas)."""
        try:
            import pandas
        except ImportError:
            raise ImportError("Sweep.to_dataframe() needs pandas (pip install pandas)") from None
        return pandas.DataFrame(self.points)

    def __repr__(self) -> str:
        return f"<memest.Sweep {self._data.get('model')!r} {len(self.points)} points>"


class Graph:
    """A model graph loaded once (:func:`load`, :func:`from_torch`).

    Each method estimates it again under its options and never re-parses
    the file; a graph may be estimated from several threads at once (the
    estimates release the GIL)."""

    def __init__(self, graph: Any, model: Optional[str] = None) -> None:
        self._g = graph
        self._model = model  # the reports' "model" when not the path

    @property
    def path(self) -> str:
        """The path it was loaded from, as given: the reports' ``model``."""
        return self._g.path

    @property
    def inputs(self) -> Tuple[str, ...]:
        """The graph inputs' names."""
        return self._g.inputs

    @property
    def parameters(self) -> Tuple[Tuple[str, str], ...]:
        """``(name, torch_name)`` of each parameter, in file order."""
        return self._g.parameters

    @property
    def node_count(self) -> int:
        """Nodes in the graph."""
        return self._g.node_count

    @property
    def opset(self) -> int:
        """The default domain's opset."""
        return self._g.opset

    @property
    def dtype(self) -> str:
        """The export's dtype: what most parameter elements are declared in."""
        return self._g.dtype

    def estimate(self, batch: Optional[int] = None, *, dims: Optional[Mapping[str, int]] = None,
                 input_shapes: Optional[Mapping[str, Union[str, Sequence[Dim]]]] = None, mode: str = "train",
                 optimizer: str = "adam", dtype: Optional[str] = None, amp: Optional[str] = None,
                 checkpoint: Checkpoint = None, trainable: Patterns = None, freeze: Patterns = None,
                 grad_accum: int = 1, world_size: int = 1, strategy: Optional[str] = None,
                 shard_group: Optional[int] = None, bucket_mb: Optional[int] = None,
                 grad_as_bucket_view: bool = False, offload: bool = False, tp: int = 1,
                 sequence_parallel: bool = False, ddp_first_bucket: str = "auto", rank: Optional[int] = None,
                 kernels: str = "pytorch",
                 gpu: Optional[str] = None,
                 gpu_memory: Size = None, reserve: Size = None, host_us: Optional[Sequence[float]] = None,
                 timeline: bool = False, depth: Optional[int] = None) -> Report:
        """Estimates one step; the arguments are the CLI's flags.

        batch: binds the leading symbolic dim of every input (``--batch``).
        dims: binds symbolic dims by name, ``{"seq": 512}`` (``--dim``).
        input_shapes: ``{"input": "batchx3x224x224"}`` or a list of sizes and
            dim names: another shape for an input (``--input-shape``).
        mode: ``"train"`` (forward, backward, optimizer step) or ``"infer"``.
        optimizer: sgd, momentum, adam, adamw or adafactor.
        dtype: float32, float16 or bfloat16 (default: the export's).
        amp: ``"bf16"`` or ``"fp16"``: the step under torch.autocast.
        checkpoint: ``1`` or ``"every=1"`` (every block), or module prefixes.
        trainable, freeze: parameter patterns (fine-tuning).
        grad_accum: micro-batches per optimizer step.
        world_size, strategy, shard_group, bucket_mb, grad_as_bucket_view,
            offload, tp, sequence_parallel, ddp_first_bucket (``"auto"``,
            ``"held"`` or ``"released"``), rank (zero1: that data-parallel
            rank's figures): several GPUs (docs/distributed.md).
        kernels: ``"pytorch"`` or ``"verify"`` (memest verify's executor).
        gpu: a GPU name (:func:`gpus`): the fit, and the step's time on it;
            or gpu_memory: a size (``"24GiB"`` or bytes); reserve: what the
            framework holds beyond the estimate (default est_default_reserve).
        host_us: five host costs in microseconds (``--host-us``), with gpu.
        timeline: add ``timeline``, every allocation and free of the step.
        depth: add ``modules``, the layers rolled up by module path.

        Raises :class:`Error` for an unbound dim, a bad option, a model the
        library cannot estimate."""
        opt = _options(batch, dims, input_shapes, mode, optimizer, dtype, amp, checkpoint, trainable, freeze,
                       grad_accum, world_size, strategy, shard_group, bucket_mb, grad_as_bucket_view, offload, tp,
                       sequence_parallel, ddp_first_bucket, rank, kernels, gpu, gpu_memory, reserve, host_us)
        return Report(self._g.estimate(timeline=bool(timeline), depth=depth or 0, model=self._model, **opt))

    def max_batch(self, gpu: Optional[str] = None, *, gpu_memory: Size = None, reserve: Size = None,
                  cap: Optional[int] = None, **options: Any) -> MaxBatch:
        """The largest batch whose step fits the GPU (``--max-batch``): a
        :class:`MaxBatch`, the report at that batch with the answer. Takes
        :meth:`estimate`'s options, except batch, timeline and depth."""
        opt = self._capacity_options(gpu, gpu_memory, reserve, options)
        return MaxBatch(self._g.max_batch(cap=cap or 0, model=self._model, **opt))

    def sweep(self, dim: str, values: Sequence[int], *, gpu: Optional[str] = None, gpu_memory: Size = None,
              reserve: Size = None, **options: Any) -> Sweep:
        """Estimates at each value of ``dim`` (``"batch"`` or a symbolic
        dim's name; ``--sweep dim=v1,v2,...``). Takes :meth:`estimate`'s
        options, except timeline and depth."""
        opt = self._capacity_options(gpu, gpu_memory, reserve, options)
        return Sweep(self._g.sweep(dim, [operator.index(v) for v in values], model=self._model, **opt))

    @staticmethod
    def _capacity_options(gpu: Optional[str], gpu_memory: Size, reserve: Size,
                          options: Dict[str, Any]) -> Dict[str, Any]:
        for bad in ("timeline", "depth", "host_us"):
            if bad in options:
                raise Error(f"{bad} is for one estimate, not max_batch or sweep")
        args = dict(batch=None, dims=None, input_shapes=None, mode="train", optimizer="adam", dtype=None, amp=None,
                    checkpoint=None, trainable=None, freeze=None, grad_accum=1, world_size=1, strategy=None,
                    shard_group=None, bucket_mb=None, grad_as_bucket_view=False, offload=False, tp=1,
                    sequence_parallel=False, ddp_first_bucket="auto", rank=None, kernels="pytorch")
        unknown = set(options) - set(args)
        if unknown:
            raise TypeError(f"unexpected option(s): {', '.join(sorted(unknown))}")
        args.update(options)
        return _options(gpu=gpu, gpu_memory=gpu_memory, reserve=reserve, host_us=None, **args)

    def __repr__(self) -> str:
        return f"<memest.Graph {self.path!r}: {self.node_count} nodes>"


def load(path: Union[str, "os.PathLike[str]"]) -> Graph:
    """Loads an ONNX (``.onnx``) or JSON graph file once; weights are never
    read. Raises :class:`Error` (``EIO``, ``EPARSE``, ...) when it cannot."""
    return Graph(_memest.load(os.fspath(path)))


def gpus() -> Dict[str, int]:
    """The GPUs ``gpu=`` takes, with the memory the fit compares with."""
    return _memest.gpus()


def from_torch(module: Any, example_inputs: Any, dynamic_shapes: Any = None, *, fake: bool = False,
               path: Optional[str] = None, **export_options: Any) -> Graph:
    """Exports a ``torch.nn.Module`` with ``torch.onnx.export(dynamo=True)``
    and loads the result.

    example_inputs: a tensor or a tuple of the forward's arguments.
    dynamic_shapes: as torch.export takes it, e.g. ``{"x": {0: "batch"}}``:
        the dims named here stay symbolic, so ``estimate(batch=...)`` binds them.
    fake: trace under ``torch._subclasses.fake_tensor.FakeTensorMode``, so
        the export computes no activations (the inputs may be fake tensors,
        and so may the module's weights when it was built in that mode).
    path: where to write the ``.onnx`` file, which is then the reports'
        ``model`` (default: a temporary file, removed once loaded: the graph
        keeps what it needs; the reports say ``<torch ClassName>``). The
        weights are written as references to an external file that is not
        written: memest never reads weights.
    export_options: passed on to ``torch.onnx.export``.

    Needs torch (and onnxscript, which torch's exporter uses)."""
    try:
        import torch
    except ImportError:
        raise ImportError("memest.from_torch needs torch (pip install torch onnxscript)") from None
    args = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    options = dict(dynamo=True, dynamic_shapes=dynamic_shapes, optimize=False, verbose=False)
    options.update(export_options)
    with warnings.catch_warnings():
        # memest estimates a training step: the module stays in training mode
        warnings.filterwarnings("ignore", message="Exporting a model while it is in training mode")
        if fake:
            from torch._subclasses.fake_tensor import FakeTensorMode

            with FakeTensorMode(allow_non_fake_inputs=True):
                program = torch.onnx.export(module, args, **options)
        else:
            program = torch.onnx.export(module, args, **options)
    _weights_as_external(program.model)
    import onnx
    import onnx_ir

    proto = onnx_ir.serde.serialize_model(program.model)
    with tempfile.TemporaryDirectory(prefix="memest-") as tmp:
        out = path or os.path.join(tmp, type(module).__name__ + ".onnx")
        onnx.save_model(proto, out)
        return Graph(_memest.load(out), model=None if path else f"<torch {type(module).__name__}>")


def _weights_as_external(model: Any) -> None:
    """Each floating initializer becomes a reference to an external file
    that is never written: memest reads dtypes and shapes only, and fake or
    meta tensors have no data to write. Integer initializers (shape
    constants) keep their values."""
    import onnx_ir as ir

    offset = 0
    for name, value in model.graph.initializers.items():
        tensor = value.const_value
        if tensor is None or not tensor.dtype.is_floating_point():
            continue
        nbytes = int(tensor.nbytes)
        value.const_value = ir.ExternalTensor("weights.bin", offset, nbytes, tensor.dtype, shape=tensor.shape,
                                              name=name, base_dir="")
        offset += (nbytes + 63) // 64 * 64
