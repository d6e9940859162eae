"""README.md's "From Python" example runs and prints what the README says,
and its peak is the CLI's."""
import contextlib
import io
import json
import os
import re

from conftest import ROOT


def test_readme_python_example(cli, monkeypatch):
    readme = open(os.path.join(ROOT, "README.md")).read()
    section = readme[readme.index("## From Python"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    printed = re.search(r"prints\n\n```\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue() == printed
    peak = json.loads(cli("models/resnet18.onnx", "--batch", "32", "--format", "json"))["peak"]
    assert out.getvalue().split("\n")[0] == f"{peak['bytes']} {peak['phase']} {peak['layer']}"
