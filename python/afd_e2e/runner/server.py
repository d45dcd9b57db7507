"""One case's vLLM servers through their life: launch, wait until ready, watch, stop (like vLLM's RemoteOpenAIServer).

The runner (``case.py``), the integration tests and the benchmarks all hold servers up through this class, so what
they measure is what a run does. Every process starts in its own session with the run's markers in its
environment; the whole marked tree is stopped at the end, also when the block is left by an exception::

    with CaseServers(case, work_dir / "logs", scratch=..., cache=...) as servers:
        servers.launch()
        servers.wait_ready(CancelFlag())
        ...  # servers.check() raises EngineDied once any role has died
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from afd_e2e.plan.model import CasePlan
from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.child_env import child_environment
from afd_e2e.runner.hygiene import remove_leftover_files, shm_entries
from afd_e2e.runner.markers import MarkedProcess, find_marked, marker_env, new_run_id
from afd_e2e.runner.processes import ServerProcess, launch
from afd_e2e.runner.readiness import wait_until_ready
from afd_e2e.runner.teardown import TeardownOutcome, terminate
from afd_e2e.runner.watch import EngineWatch
from afd_e2e.system.executables import resolve_executable
from afd_e2e.system.ports import busy_ports


class LaunchFailed(Exception):
    """A case's processes could not be started (a port in use, an executable that does not run)."""


class CaseServers:
    """The processes of one case; logs in ``log_dir/<process>.log``, temp files and sockets in ``scratch``."""

    def __init__(
        self,
        case: CasePlan,
        log_dir: Path,
        *,
        scratch: Path,
        cache: Path,
        run_id: str | None = None,
        base_env: Mapping[str, str] | None = None,
        executables: Mapping[str, str] | None = None,
        on_launch: Callable[[ServerProcess, Mapping[str, str]], None] = lambda _server, _env: None,
    ) -> None:
        self.case = case
        self.log_dir = log_dir
        self.scratch = scratch
        self.cache = cache
        self.run_id = run_id or new_run_id()
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.executables = dict(executables or {})
        self.on_launch = on_launch
        self.servers: list[ServerProcess] = []
        self.watch: EngineWatch | None = None
        self.stopped: TeardownOutcome | None = None
        self.leftovers: dict[str, str] | None = None
        self.shm_before = shm_entries()  # what /dev/shm held before: never removed as the case's own
        self.host = urlsplit(case.base_url).hostname or "127.0.0.1"

    def __enter__(self) -> CaseServers:
        return self

    def __exit__(self, *_exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        """Whatever the block did: the tree stopped and the files it left removed."""
        if self.stopped is None:
            self.stop(self.case.teardown_grace_s)
        if self.leftovers is None:
            self.remove_leftovers()

    def log_path(self, process_name: str) -> Path:
        return self.log_dir / f"{process_name}.log"

    def find(self) -> list[MarkedProcess]:
        """The live processes carrying this case's markers (the whole tree, re-parented ones too)."""
        return find_marked(self.run_id, self.case.id)

    def launch(self, flag: CancelFlag | None = None) -> None:
        """Start every process in plan order (FFN before Attention) and start watching them at once."""
        busy = busy_ports(self.case.ports, self.host)
        if busy:
            held = ", ".join(f"{port} held by {who}" for port, who in busy.items())
            raise LaunchFailed(f"ports in use before start: {held}")
        self.scratch.mkdir(parents=True, exist_ok=True)
        for process in self.case.processes:
            if flag is not None:
                flag.check()
            env = child_environment(
                self.base_env,
                process,
                scratch=self.scratch,
                cache=self.cache,
                markers=marker_env(self.run_id, self.case.id, process.name),
            )
            executable = self.executables.get(process.argv[0]) or resolve_executable(process.argv[0])
            argv = (executable, *process.argv[1:])
            try:
                server = launch(process.name, argv, env, self.log_path(process.name))
            except OSError as exc:
                raise LaunchFailed(f"cannot start {process.name}: {exc}") from exc
            self.servers.append(server)
            self.on_launch(server, env)
        health = {p.name: f"http://{self.host}:{p.api_port}/health" for p in self.case.processes}
        self.watch = EngineWatch([(s, health[s.name]) for s in self.servers]).start()

    @property
    def launched_at(self) -> float:
        return min(server.launched_at for server in self.servers)

    def wait_ready(self, flag: CancelFlag, budget_s: float | None = None) -> float:
        """Seconds from the first launch until the API answers (raises EngineDied, StartupTimeout or Cancelled)."""
        assert self.watch is not None, "launch() first"
        budget = self.case.startup_timeout_s if budget_s is None else budget_s
        return wait_until_ready(self.case.ready_url, self.watch, self.launched_at, budget, flag)

    def check(self) -> None:
        """Raise EngineDied once any role has died (its process exited, its engine died, a fatal log line)."""
        if self.watch is not None:
            self.watch.check()

    def server(self, name: str) -> ServerProcess:
        return next(s for s in self.servers if s.name == name)

    def api_server(self) -> ServerProcess:
        name = next(p.name for p in self.case.processes if p.serves_api)
        return self.server(name)

    def stop(self, grace_s: float, cancel: threading.Event | None = None) -> TeardownOutcome:
        """Stop watching, SIGTERM the whole marked tree, SIGKILL what outlives ``grace_s`` (shortened once
        ``cancel`` is set); reap the leaders."""
        if self.watch is not None:
            self.watch.stop()
        self.stopped = terminate(self.find, grace_s, cancel=cancel)
        for server in self.servers:
            server.reap()
        return self.stopped

    def remove_leftovers(self) -> dict[str, str]:
        """After ``stop``: remove the scratch folder and the shared-memory entries the case created (a check record)."""
        self.leftovers = remove_leftover_files(self.scratch, self.shm_before)
        return self.leftovers
