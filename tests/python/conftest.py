"""Where the tests find memest's command and models: MEMEST_CLI and
MEMEST_MODELS, which `meson test` sets (tests/meson.build); by default the
build-py tree and the repository's models/."""
import os
import subprocess
from typing import List

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session")
def models() -> str:
    return os.environ.get("MEMEST_MODELS", os.path.join(ROOT, "models"))


@pytest.fixture(scope="session")
def cli():
    """Runs the memest command; returns its standard output."""
    exe = os.environ.get("MEMEST_CLI", os.path.join(ROOT, "build-py", "cli", "memest"))

    def run(*args: str) -> str:
        return subprocess.run([exe, *args], check=True, capture_output=True, text=True).stdout

    return run
