"""The count of real vLLM servers a test session started (``tests/conftest.py`` registers the counter when the
session collected engine or GPU tests; ``.ci/run`` prints the count in its closing table)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import psutil
import pytest

LAUNCH_POLL_S = 0.2  # a vllm serve lives for seconds at the least (imports alone take longer), so none is missed


def is_vllm_serve(argv: list[str]) -> bool:
    """The API server of a ``vllm serve`` (its EngineCore renames itself, so each server counts once): the console
    script (``vllm serve``, ``python .../vllm serve``) or the GPU kit's wrapper, which runs
    ``python -m vllm.entrypoints.cli.main serve``. Not a ``vllm bench serve`` (a warm bench client's child is titled
    ``.../vllm bench serve ...``): ``serve`` must be the subcommand itself."""
    console = any(Path(arg).name == "vllm" and argv[i + 1 : i + 2] == ["serve"] for i, arg in enumerate(argv[:2]))
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
