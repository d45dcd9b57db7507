"""The suite's tiers, checked at collection, and the count of real vLLM servers the run started.

Every test lives in exactly one tier, by folder (docs/design.md, "Test tiers"):

- ``tests/unit``: pure code and fast process tests with stand-ins; needs no vLLM;
- ``tests/engine``: needs the real CPU vLLM (scripts/install-cpu-vllm); marked ``engine``;
- ``tests/gpu``: needs NVIDIA GPUs and skips without them; marked ``gpu``.

A test file outside these folders fails collection, naming the fix, so no test runs in no tier. At the end of a run
that collected engine or GPU tests, the number of ``vllm serve`` processes started while it ran is printed: CI's
time goes mostly to server launches, so the count is watched (``.ci/run`` prints it in its closing table).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import psutil
import pytest

from afd_e2e.phases import rendering

TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "engine", "gpu")
LAUNCH_POLL_S = 0.2  # a vllm serve lives for seconds at the least (imports alone take longer), so none is missed

rendering.install()  # the built-in phases and their renderers, as the commands that run or render install them


def tier_of(path: Path) -> str | None:
    """The tier a test file belongs to: the first folder under tests/, when it is a tier's."""
    try:
        first = Path(path).resolve().relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return None
    return first if first in TIERS else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    outside = sorted({str(item.path) for item in items if tier_of(item.path) is None})
    if outside:
        raise pytest.UsageError(
            f"tests in no tier: {', '.join(outside)}; fix: move each under tests/unit, tests/engine or tests/gpu"
        )
    for item in items:
        tier = tier_of(item.path)
        if tier != "unit":
            item.add_marker(getattr(pytest.mark, tier))
        wrong = [t for t in TIERS if t != tier and t != "unit" and item.get_closest_marker(t) is not None]
        if wrong:
            raise pytest.UsageError(f"{item.nodeid} is in tests/{tier} but marked {wrong[0]}; fix: move it or unmark")
    if any(tier_of(item.path) != "unit" for item in items):
        config.pluginmanager.register(LaunchCounter(), "afd-e2e-launch-counter")


def is_vllm_serve(argv: list[str]) -> bool:
    """The API server of a ``vllm serve`` (its EngineCore renames itself, so each server counts once): the console
    script (``vllm serve``, ``python .../vllm serve``) or the GPU kit's wrapper, which runs
    ``python -m vllm.entrypoints.cli.main serve``."""
    console = any(Path(arg).name == "vllm" for arg in argv[:2]) and "serve" in argv[1:3]
    return console or argv[1:4] == ["-m", "vllm.entrypoints.cli.main", "serve"]


class LaunchCounter:
    """Counts the distinct ``vllm serve`` processes this session started (its descendants: other checkouts' servers
    on a shared machine are not this run's launches) while the session runs."""

    def __init__(self) -> None:
        self.seen: set[tuple[int, float]] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, name="vllm-launch-counter", daemon=True)

    def _poll(self) -> None:
        while not self.stop.wait(LAUNCH_POLL_S):
            for process in psutil.process_iter(["pid", "cmdline", "create_time"]):
                if is_vllm_serve(process.info["cmdline"] or []) and self._ours(process):
                    self.seen.add((process.info["pid"], process.info["create_time"]))

    @staticmethod
    def _ours(process: psutil.Process) -> bool:
        try:
            return any(parent.pid == os.getpid() for parent in process.parents())
        except psutil.Error:  # gone meanwhile
            return False

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.thread.start()  # registered during collection: the session's start has passed

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config) -> None:
        self.stop.set()
        terminalreporter.write_line(f"vLLM launches: {len(self.seen)}")
