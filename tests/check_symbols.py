#!/usr/bin/env python3
"""The shared library exports the public API and nothing else: every
defined dynamic symbol of libestimate.so is an EST_API declaration of
<libestimate/estimate.h>, and every such declaration is exported
(libestimate/libestimate.map). Exit 77 (skip) without nm.

usage: check_symbols.py LIBESTIMATE_SO ESTIMATE_H
"""
import re
import shutil
import subprocess
import sys


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    so, header = sys.argv[1:]
    if not shutil.which("nm"):
        print("SKIP: no nm")
        return 77
    out = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True, check=True).stdout
    exported = {f[2].split("@")[0] for f in (line.split() for line in out.splitlines()) if len(f) == 3 and f[1] != "A"}
    text = open(header).read()
    declared = set(re.findall(r"EST_API[^;(]*?\b(est_\w+)\s*\(", text, re.S))
    leaked = sorted(exported - declared)
    missing = sorted(declared - exported)
    for name in leaked:
        print(f"FAIL: {so} exports {name}, which {header} does not declare")
    for name in missing:
        print(f"FAIL: {header} declares {name}, which {so} does not export")
    if not declared:
        print(f"FAIL: no EST_API declaration found in {header}")
    ok = not leaked and not missing and declared
    print(f"{len(exported)} symbols exported, {len(declared)} declared: {'ok' if ok else 'mismatch'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
