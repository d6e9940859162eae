#!/usr/bin/env python3
"""Runs the pytest suite of the memest Python module (tests/python) for
`meson test --suite python`; exit 77 (skip) where pytest is not installed.

usage: run_pytest.py TESTS_DIR [pytest arguments...]
"""
import sys

try:
    import pytest
except ImportError:
    print("SKIP: pytest is not installed (Debian: python3-pytest)")
    sys.exit(77)

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
