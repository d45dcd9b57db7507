"""Shared by engine tests: the real CPU vLLM's tiny model, built locally once per session."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """The embedded default's tiny model in the repository's .tiny-model (built once; the build is idempotent)."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vLLM is not importable from this Python; install it with scripts/install-cpu-vllm")
    from afd_e2e.tiny_model import build_tiny_model

    return build_tiny_model(REPO / ".tiny-model")
