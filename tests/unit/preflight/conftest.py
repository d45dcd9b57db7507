"""pytest fixtures for the preflight unit tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from preflight_fixtures import QWEN35_CONFIG, write_checkpoint


@pytest.fixture
def make_checkpoint(tmp_path: Path) -> Callable[..., Path]:
    def make(config: Any = QWEN35_CONFIG, name: str = "ckpt", **kwargs: Any) -> Path:
        return write_checkpoint(tmp_path / name, config, **kwargs)

    return make
