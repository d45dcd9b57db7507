"""The count of real vLLM servers a test session started, each put down to the module whose code started it
(``tests/conftest.py`` registers the counter when the session collected engine or GPU tests; ``.ci/run`` prints the
counts in its closing table).

CI's time goes mostly to server launches, so each module that launches declares the most it may start, with its
reason in its docstring: ``LAUNCHES = N`` at module level (a conftest's session fixtures count for the conftest). A
module that starts more than it declares fails the session, naming itself: a new launch is either shared (a test
that only needs a running server reads a shared run) or declared, with its reason, where the next reader looks.
``tests/unit/foundation/test_launch_counter.py`` keeps every engine module declaring (the GPU tier's are counted,
not judged).
"""

from __future__ import annotations

import inspect
import os
import threading
from pathlib import Path
from types import ModuleType

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


def owner_name(module: ModuleType | None, root: Path) -> str:
    """A module as the counts name it: its path under the repository (``tests/engine/test_stall_cpu_vllm.py``)."""
    if module is None or not getattr(module, "__file__", None):
        return "(outside any test module)"
    path = Path(module.__file__)
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def over_declared(launched: dict[str, int], declared: dict[str, int | None]) -> list[str]:
    """One line per module that started more servers than its ``LAUNCHES`` allows. A module that declares nothing
    is counted, not judged: the GPU tier's modules run on lent machines, outside CI's time."""
    return [
        f"{name} started {count} vLLM servers and declares LAUNCHES = {declared[name]}: share a running server "
        "(the session's shared run) or declare the launch with its reason in the module's docstring"
        for name, count in sorted(launched.items())
        if declared.get(name) is not None and count > declared[name]
    ]


class LaunchCounter:
    """Counts the distinct ``vllm serve`` processes this session started (its descendants: other checkouts' servers
    on a shared machine are not this run's launches) while the session runs, each under the module running when it
    appeared: the test's, or the fixture's being set up (a session fixture of a conftest is the conftest's)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, float], ModuleType | None] = {}
        self.owners: list[ModuleType | None] = []  # the test's module, then each fixture's being set up inside it
        self.launched: dict[str, int] = {}  # by module, once the session has finished
        self.declared: dict[str, int | None] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, name="vllm-launch-counter", daemon=True)

    def _poll(self) -> None:
        while not self.stop.wait(LAUNCH_POLL_S):
            for process in psutil.process_iter(["pid", "cmdline", "create_time"]):
                key = (process.info["pid"], process.info["create_time"])
                if key not in self.seen and is_vllm_serve(process.info["cmdline"] or []) and self._ours(process):
                    innermost = self.owners[-1:]  # one slice: the main thread may pop meanwhile
                    self.seen[key] = innermost[0] if innermost else None

    @staticmethod
    def _ours(process: psutil.Process) -> bool:
        try:
            return any(parent.pid == os.getpid() for parent in process.parents())
        except psutil.Error:  # gone meanwhile
            return False

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.thread.start()  # registered during collection: the session's start has passed

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item):
        self.owners.append(getattr(item, "module", None))
        try:
            yield
        finally:
            self.owners.pop()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef):
        self.owners.append(inspect.getmodule(fixturedef.func))
        try:
            yield
        finally:
            self.owners.pop()

    def _by_module(self, root: Path) -> tuple[dict[str, int], dict[str, int | None]]:
        launched: dict[str, int] = {}
        declared: dict[str, int | None] = {}
        for module in self.seen.values():
            name = owner_name(module, root)
            launched[name] = launched.get(name, 0) + 1
            declared[name] = getattr(module, "LAUNCHES", None)
        return launched, declared

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.stop.set()
        self.thread.join(timeout=2 * LAUNCH_POLL_S)
        self.launched, self.declared = self._by_module(session.config.rootpath)
        if over_declared(self.launched, self.declared):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config) -> None:
        terminalreporter.write_line(f"vLLM launches: {len(self.seen)}")
        for name, count in sorted(self.launched.items()):
            terminalreporter.write_line(f"  {count:3d} {name} (declares at most {self.declared[name]})")
        for line in over_declared(self.launched, self.declared):
            terminalreporter.write_line(f"FAILED launch count: {line}", red=True)
