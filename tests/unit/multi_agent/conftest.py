"""A build's shared store for the multi-agent tests: the buildkite-agent stub first on PATH."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from repo_paths import REPO


@pytest.fixture
def build(tmp_path: Path, monkeypatch) -> Path:
    """A build's shared store, with the buildkite-agent stub first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "buildkite-agent").symlink_to(REPO / "tests" / "stubs" / "record-call")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("STUB_CALLS", str(tmp_path / "calls.log"))
    monkeypatch.setenv("STUB_BUILDKITE_STORE", str(tmp_path / "store"))
    return tmp_path
