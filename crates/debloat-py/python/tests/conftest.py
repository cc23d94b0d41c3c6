"""Shared fixtures: the `debloat` binary the package is checked against."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="session")
def cli() -> str:
    """The CLI: $DEBLOAT_BIN, else the workspace's target/release/debloat, else `debloat` on PATH."""
    for c in (os.environ.get("DEBLOAT_BIN"), str(REPO / "target/release/debloat"), shutil.which("debloat")):
        if c and Path(c).is_file():
            return c
    pytest.fail("no debloat binary: build it (cargo build --release) or set DEBLOAT_BIN")


def run_cli(cli: str, *words: str, cwd=None) -> subprocess.CompletedProcess:
    """`debloat WORDS…`, its output captured; fails the test with stderr if it fails."""
    p = subprocess.run([cli, *words], capture_output=True, text=True, cwd=cwd)
    assert p.returncode == 0, f"debloat {' '.join(words)}: {p.stderr}"
    return p
