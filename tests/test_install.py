#!/usr/bin/env python3
"""The C install: `meson install --destdir` into a fresh folder, then the
installed memest runs without LD_LIBRARY_PATH (its run path finds
libestimate.so.0), the header is <libestimate/estimate.h>, pkg-config finds
the library, the man page is there (when help2man made it), and README.md's
"From C" example builds against the install and prints the CLI's peak.

usage: test_install.py MESON BUILD_DIR SOURCE_DIR DESTDIR PREFIX BINDIR LIBDIR INCLUDEDIR MANDIR MAN_BUILT
"""
import os
import re
import shutil
import subprocess
import sys


def main():
    if len(sys.argv) != 11:
        print(__doc__, file=sys.stderr)
        return 2
    meson, build, source, dest, prefix, bindir, libdir, includedir, mandir, man_built = sys.argv[1:]
    cc = shutil.which("cc")
    pkg_config = shutil.which("pkg-config")
    if not cc or not pkg_config:
        print("SKIP: no cc or pkg-config")
        return 77
    shutil.rmtree(dest, ignore_errors=True)
    subprocess.run([meson, "install", "-C", build, "--no-rebuild", "--quiet", "--destdir", dest], check=True,
                   stdout=subprocess.DEVNULL)
    root = lambda d: os.path.join(dest, os.path.join(prefix, d).lstrip("/"))  # noqa: E731
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    models = os.path.join(source, "models")
    cli = subprocess.run([os.path.join(root(bindir), "memest"), "resnet18.onnx", "--batch", "32", "--format", "json"],
                         cwd=models, env=env, capture_output=True, text=True)
    ok = True
    if cli.returncode != 0:
        print(f"FAIL: the installed memest does not run: {cli.stderr.strip()}")
        return 1
    peak = re.search(r'"peak":\s*\{\s*"bytes":\s*(\d+)', cli.stdout).group(1)
    for path in [os.path.join(root(includedir), "libestimate", "estimate.h"),
                 os.path.join(root(libdir), "pkgconfig", "libestimate.pc")] + \
                ([os.path.join(root(mandir), "man1", "memest.1")] if man_built == "true" else []):
        if not os.path.isfile(path):
            print(f"FAIL: {path} is not installed")
            ok = False
    # README.md's "From C" example, built with pkg-config against the install
    readme = open(os.path.join(source, "README.md")).read()
    example = re.search(r"## From C\n+```c\n(.*?)```", readme, re.S).group(1)
    work = os.path.join(dest, "example")
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "example.c"), "w") as f:
        f.write(example)
    pc_env = dict(env, PKG_CONFIG_PATH=os.path.join(root(libdir), "pkgconfig"), PKG_CONFIG_SYSROOT_DIR=dest)
    flags = subprocess.run([pkg_config, "--cflags", "--libs", "libestimate"], env=pc_env, check=True,
                           capture_output=True, text=True).stdout.split()
    exe = os.path.join(work, "example")
    subprocess.run([cc, "-std=c11", "-o", exe, os.path.join(work, "example.c"), *flags,
                    "-Wl,-rpath," + root(libdir)], check=True)
    out = subprocess.run([exe], cwd=source, env=env, capture_output=True, text=True, check=True).stdout
    want = f"peak {peak} bytes, during backward\n"
    if out != want:
        print(f"FAIL: README's C example printed {out!r}, the installed memest's peak gives {want!r}")
        ok = False
    if f"prints `{want.strip()}`" not in readme:
        print(f"FAIL: README.md does not say the C example prints `{want.strip()}`")
        ok = False
    print("install: " + ("ok" if ok else "failed"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
