"""Fixtures shared by the unit tier: it runs in a venv with only the package and its test tools (no vLLM)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest


@pytest.fixture
def vllm_on_path(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in `vllm` executable on PATH, for code that must find one before it launches anything (plans print
    its path, input checks and preflight resolve it). It refuses to run: nothing in the unit tier starts an engine.
    Where the real vLLM sits beside this Python (the engine tier's venv), that one is still found first."""
    folder = tmp_path_factory.mktemp("vllm-bin")
    exe = folder / "vllm"
    exe.write_text(f"#!{sys.executable}\nraise SystemExit('stand-in vllm: the unit tier starts no engine')\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return exe
