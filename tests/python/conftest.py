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
def cli_path() -> str:
    """The memest command's path."""
    return os.environ.get("MEMEST_CLI", os.path.join(ROOT, "build-py", "cli", "memest"))


@pytest.fixture(scope="session")
def cli(cli_path):
    """Runs the memest command; returns its standard output."""

    def run(*args: str) -> str:
        return subprocess.run([cli_path, *args], check=True, capture_output=True, text=True).stdout

    return run
