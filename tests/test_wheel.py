#!/usr/bin/env python3
"""`pip install SOURCE_DIR` into a fresh virtual environment, as a user
would (issue 22): meson-python comes from PyPI through pip's build
isolation and builds the wheel out of the source tree. Then README.md's
"From Python" example, run with the environment's python from the source
root, prints what the README says it prints, its peak that of the build
tree's `memest models/resnet18.onnx --batch 32 --format json`, and the
environment's `memest` command runs with LD_LIBRARY_PATH unset and reports
the same peak.

Exit 77 (skip) where the venv module cannot make an environment with pip
(Debian: python3-venv) or where PyPI cannot be reached; never a failure for
either. Nothing is written into the source tree: the build folder is given
to meson-python (its default is a .mesonpy-* folder inside the source tree).

usage: test_wheel.py MEMEST SOURCE_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

# What pip says when it cannot reach the index (urllib3's and requests'
# errors, which pip prints while it retries).
NETWORK_ERRORS = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Temporary failure in name resolution|"
    r"Name or service not known|No address associated with hostname|Network is unreachable|"
    r"Connection refused|Connection reset|ConnectTimeoutError|ReadTimeoutError|ProxyError|"
    r"Max retries exceeded|Could not fetch URL")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def network_failure(proc):
    return proc.returncode != 0 and NETWORK_ERRORS.search(proc.stderr + proc.stdout)


def stray(source):
    """Entries of the source root that a build inside it would leave."""
    return {e for e in os.listdir(source) if e.startswith(".mesonpy") or e.endswith(".egg-info")
            or e in ("dist", "wheelhouse")}


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    memest, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    # the environment a user's shell would give: no build tree on any path,
    # no pip setting that would install elsewhere or skip build isolation
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV", "PIP_USER",
                        "PIP_TARGET", "PIP_PREFIX", "PIP_ROOT", "PIP_NO_BUILD_ISOLATION")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    before = stray(source)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="memest-wheel-") as tmp:
        venv = os.path.join(tmp, "venv")
        made = run([sys.executable, "-m", "venv", venv], env=env)
        pip, python = os.path.join(venv, "bin", "pip"), os.path.join(venv, "bin", "python")
        if made.returncode != 0 or not os.path.exists(pip):
            print(f"SKIP: {sys.executable} -m venv cannot make an environment with pip "
                  f"(Debian: apt install python3-venv): {made.stderr.strip()[-300:]}")
            return 77
        # can pip reach the index at all? (short timeout, one retry)
        probe = run([pip, "download", "meson-python", "--no-deps", "--no-cache-dir", "--timeout", "15",
                     "--retries", "1", "-d", os.path.join(tmp, "probe")], env=env)
        if probe.returncode != 0:
            if network_failure(probe):
                print("SKIP: pip cannot reach the package index for meson-python:\n" + probe.stderr.strip()[-600:])
                return 77
            print("FAIL: pip download meson-python:\n" + probe.stderr)
            return 1
        builddir = os.path.join(tmp, "build")
        inst = run([pip, "install", "--timeout", "30", f"--config-settings=builddir={builddir}", source],
                   env=env, cwd=tmp)
        if inst.returncode != 0:
            if network_failure(inst):
                print("SKIP: pip lost the package index during the install:\n" + inst.stderr.strip()[-600:])
                return 77
            print(f"FAIL: pip install {source}:\n{inst.stdout[-4000:]}\n{inst.stderr[-4000:]}")
            return 1
        print(f"pip install: {time.monotonic() - start:.1f} s")
        ok = True

        # the package imported is the environment's, not the source tree's
        where = run([python, "-c", "import memest, sys; print(memest.__file__); print(sys.prefix)"],
                    env=env, cwd=source)
        if where.returncode != 0 or not where.stdout.startswith(os.path.join(venv, "lib")):
            print(f"FAIL: memest is not imported from {venv}: {where.stdout}{where.stderr}")
            ok = False

        # README.md's "From Python" example, from the source root
        readme = open(os.path.join(source, "README.md")).read()
        section = readme[readme.index("## From Python"):]
        example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
        printed = re.search(r"prints\n\n```\n(.*?)```", section, re.S).group(1)
        script = os.path.join(tmp, "example.py")
        with open(script, "w") as f:
            f.write(example)
        out = run([python, script], env=env, cwd=source)
        cli = run([memest, "models/resnet18.onnx", "--batch", "32", "--format", "json"], env=env, cwd=source)
        if cli.returncode != 0:
            print(f"FAIL: {memest}: {cli.stderr.strip()}")
            return 1
        peak = json.loads(cli.stdout)["peak"]
        want = f"{peak['bytes']} {peak['phase']} {peak['layer']}"
        first = out.stdout.split("\n")[0]
        if out.returncode != 0 or first != want or out.stdout != printed:
            print(f"FAIL: README's Python example printed {out.stdout!r} (stderr {out.stderr.strip()!r}); "
                  f"the CLI's peak is {want!r}, the README says it prints {printed!r}")
            ok = False

        # the environment's memest command, without LD_LIBRARY_PATH
        exe = os.path.join(venv, "bin", "memest")
        version = run([exe, "--version"], env=env)
        if version.returncode != 0 or not version.stdout.strip():
            print(f"FAIL: {exe} --version: exit {version.returncode}: {version.stdout}{version.stderr}")
            ok = False
        mine = run([exe, "models/resnet18.onnx", "--batch", "32", "--format", "json"], env=env, cwd=source)
        if mine.returncode != 0 or json.loads(mine.stdout)["peak"] != peak:
            print(f"FAIL: {exe} models/resnet18.onnx --batch 32 does not report the build tree's peak: "
                  f"{mine.stderr.strip() or mine.stdout[:200]}")
            ok = False

    left = stray(source) - before
    if left:
        print(f"FAIL: pip install left {', '.join(sorted(left))} in {source}")
        ok = False
    print(f"wheel: {'ok' if ok else 'failed'} ({time.monotonic() - start:.1f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
