"""memest.from_torch: a module exported with torch.onnx (dynamo) and
estimated; skipped where torch or onnxscript cannot be imported."""
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")

import memest  # noqa: E402


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 256)
        self.fc2 = torch.nn.Linear(256, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def test_from_torch_batch_is_symbolic():
    x = torch.randn(4, 64)
    g = memest.from_torch(MLP(), (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    r8, r16 = g.estimate(batch=8), g.estimate(batch=16)
    assert r8.totals["param_count"] == 64 * 256 + 256 + 256 * 10 + 10
    assert r8.peak_bytes < r16.peak_bytes
    assert r8.model == "<torch MLP>"
    assert sorted(p[1] for p in g.parameters) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]


def test_from_torch_fake_mode(tmp_path):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        module = MLP()
        x = torch.empty(4, 64)
    path = str(tmp_path / "mlp.onnx")
    g = memest.from_torch(module, (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch")}}, fake=True, path=path)
    real = memest.from_torch(MLP(), (torch.randn(4, 64),), dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    assert g.estimate(batch=8).peak_bytes == real.estimate(batch=8).peak_bytes
    assert g.estimate(batch=8).model == path
