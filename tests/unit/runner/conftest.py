"""Fixtures that start marked stand-in processes and stop whatever a test leaves behind."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest

from afd_e2e.runner.teardown import terminate
from afd_e2e.system.markers import find_marked, marker_env, new_run_id
from afd_e2e.system.processes import ServerProcess, launch


@pytest.fixture
def run_id() -> Iterator[str]:
    """A fresh run id; whatever still carries it at the end of the test is stopped."""
    value = new_run_id()
    yield value
    terminate(partial(find_marked, value), 0.5)


@pytest.fixture
def spawn(run_id: str, tmp_path: Path) -> Callable[..., ServerProcess]:
    def start(script: str, *, case_id: str = "case", name: str = "server") -> ServerProcess:
        env = {"PATH": "/usr/bin:/bin", **marker_env(run_id, case_id, name)}
        return launch(name, (sys.executable, "-c", script), env, tmp_path / "logs" / case_id / f"{name}.log")

    return start
