"""One case's vLLM servers through their life: launch, wait until ready, watch, stop (like vLLM's RemoteOpenAIServer).

The runner (``case.py``), the engine tests and the benchmarks all hold servers up through this class, so what
they measure is what a run does. Every process starts in its own session with the run's markers in its
environment; the whole marked tree is stopped at the end, also when the block is left by an exception::

    with CaseServers(case, work_dir / "logs", scratch=..., cache=...) as servers:
        servers.launch()
        servers.wait_ready(CancelFlag())
        ...  # servers.check() raises EngineDied once any role has died

A case whose processes run on several agents (profile ``placement``) holds here only the processes of this agent
(``hosted``); ``join`` hands it the case with its addresses filled in and the other agents' processes to watch
(``multi_agent``), so a remote role's death fails the case like a local one.

With ``bench_executable`` (the runner gives it to a case whose phases run ``vllm bench serve``) the case's warm bench
client (``workloads.bench.WarmClient``) starts as its processes are spawned, so its import of vLLM (8-15 s of a CPU
core) overlaps their start-up instead of following it; every phase of the case measures with it (``bench_client``),
and ``stop`` closes it before it stops the tree, so the hygiene checks after it find nothing of it left.

With ``telemetry`` settings the case is also sampled about once a second from launch (``afd_e2e.telemetry``):
``mark(phase)`` says what it does, ``check_progress()`` raises Stalled once the watchdog has found a stall, and a
start-up stall either raises StartupStalled from ``wait_ready`` or is handed to ``on_startup_stall``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from afd_e2e.plan.model import CasePlan, ProcessPlan
from afd_e2e.plan.serve_argv import OUT_DIR
from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.hygiene import remove_leftover_files, shm_entries
from afd_e2e.runner.readiness import wait_until_ready
from afd_e2e.runner.teardown import TeardownOutcome, terminate
from afd_e2e.runner.watch import EngineWatch, WatchedRole
from afd_e2e.system.child_env import child_environment, client_environment
from afd_e2e.system.executables import resolve_executable
from afd_e2e.system.markers import MarkedProcess, find_run, marker_env, new_run_id
from afd_e2e.system.ports import busy_ports
from afd_e2e.system.processes import ServerProcess, launch, log_tail
from afd_e2e.telemetry.sampler import Sampler, TelemetrySettings
from afd_e2e.telemetry.watchdog import Stall
from afd_e2e.workloads import bench


class LaunchFailed(Exception):
    """A case's processes could not be started (a port in use, an executable that does not run)."""


class Stalled(Exception):
    """The watchdog found the case stalled (requests in flight, no token moving) or its start-up stalled."""

    def __init__(self, stall: Stall) -> None:
        super().__init__(stall.message)
        self.stall = stall


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
        out_dir: Path | None = None,
        telemetry: TelemetrySettings | None = None,
        on_startup_stall: Callable[[Stall], None] | None = None,
        hosted: Collection[str] | None = None,
        bench_executable: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        """``clock`` is what the start-up budget and the telemetry's samples (the watchdog's stall_s) are read on, and
        ``sleep`` how the sampler waits between samples (None: on its stop event); tests drive both.
        ``bench_executable``: the ``vllm`` whose ``bench serve`` the case's phases run, its warm client started at
        ``launch`` (None: no client; the phases' commands, if any, are processes of their own)."""
        self.case = case
        self.clock, self.sleep = clock, sleep
        self.hosted = tuple(p.name for p in case.processes if hosted is None or p.name in hosted)
        self.remote: tuple[WatchedRole, ...] = ()  # another agent's processes, watched from here (``join``)
        self.before_each: Callable[[ProcessPlan], None] | None = None  # the launch order across agents (``join``)
        self.out_dir = out_dir  # the results folder, where the plan's out_dir_env folders (profiler traces) go
        self.log_dir = log_dir
        self.scratch = scratch
        self.cache = cache
        self.run_id = run_id or new_run_id()
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.executables = dict(executables or {})
        self.on_launch = on_launch
        self.servers: list[ServerProcess] = []
        self.bench_executable = bench_executable
        # the case's warm bench client, from ``launch`` to ``stop``; None without ``bench_executable``, or where it
        # is not vLLM's own CLI (``bench.warm_interpreter``)
        self.bench_client: bench.WarmClient | None = None
        self.watch: EngineWatch | None = None
        self.telemetry = telemetry
        self.sampler: Sampler | None = None
        self.on_startup_stall = on_startup_stall  # None: a start-up stall fails the case
        self._startup_stall_seen = False
        self._launch_started = clock()
        self.kept = False  # --keep-on-stall: the processes are left up, never stopped here
        self.stopped: TeardownOutcome | None = None
        self.leftovers: dict[str, str] | None = None
        self.shm_before = shm_entries()  # what /dev/shm held before: never removed as the case's own
        self.host = urlsplit(case.base_url).hostname or "127.0.0.1"

    @property
    def local(self) -> CasePlan:
        """The case as this agent runs it: only the processes it hosts."""
        return replace(self.case, processes=tuple(p for p in self.case.processes if p.name in self.hosted))

    def join(
        self,
        case: CasePlan,
        remote: Sequence[WatchedRole],
        host: str,
        *,
        before_each: Callable[[ProcessPlan], None] | None = None,
    ) -> None:
        """Before ``launch``: the case with every address filled in, the roles other agents run (watched from
        launch like local ones), the address this agent's processes listen on, and what to wait for before each
        of its processes starts (the launch order across agents)."""
        self.case, self.remote, self.host, self.before_each = case, tuple(remote), host, before_each

    def __enter__(self) -> CaseServers:
        return self

    def __exit__(self, *_exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        """Whatever the block did: the tree stopped and the files it left removed."""
        if self.kept:
            return
        if self.stopped is None:
            self.stop(self.case.teardown_grace_s)
        if self.leftovers is None:
            self.remove_leftovers()

    def log_path(self, process_name: str) -> Path:
        return self.log_dir / f"{process_name}.log"

    def find(self) -> list[MarkedProcess]:
        """The live processes of this case: those carrying its markers (the whole tree, re-parented ones too) and
        the members of its servers' sessions (EngineCore and workers, whose markers setproctitle hid)."""
        return find_run(self.run_id, [(self.case.id, s.name, s.pid) for s in self.servers], self.case.id)

    def launch(self, flag: CancelFlag | None = None) -> None:
        """Start every process in plan order (the connector's launch order) and start watching them at once."""
        local = self.local
        self._launch_started = self.clock()
        busy = busy_ports(local.ports, self.host)
        if busy:
            held = ", ".join(f"{port} held by {who}" for port, who in busy.items())
            raise LaunchFailed(f"ports in use before start: {held}")
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.bench_client = self._open_bench_client()  # beside the processes: its import overlaps their start-up
        for process in local.processes:
            if flag is not None:
                flag.check()
            if self.before_each is not None:
                self.before_each(process)
            env = child_environment(
                self.base_env,
                process,
                scratch=self.scratch,
                cache=self.cache,
                markers=marker_env(self.run_id, self.case.id, process.name),
                out_dir=self.out_dir,
            )
            if self.out_dir is not None:  # folders the process writes into (a dump path's folder too)
                for relative in process.out_dir_env.values():
                    (self.out_dir / relative).parent.mkdir(parents=True, exist_ok=True)
            executable = self.executables.get(process.argv[0]) or resolve_executable(process.argv[0])
            argv = (executable, *process.argv[1:])
            if self.out_dir is not None:  # a folder in the results folder named in argv (a native profiler's)
                argv = tuple(arg.replace(OUT_DIR, str(self.out_dir)) for arg in argv)
            if not self.servers:  # the first launch: after its before_each, which may wait on other agents
                self._launch_started = self.clock()
            try:
                server = launch(process.name, argv, env, self.log_path(process.name))
            except OSError as exc:
                raise LaunchFailed(f"cannot start {process.name}: {exc}") from exc
            self.servers.append(server)
            self.on_launch(server, env)
        health = {p.name: f"http://{self.host}:{p.api_port}/health" for p in local.processes}
        self.watch = EngineWatch(
            [(s, health[s.name]) for s in self.servers], remote=self.remote, clock=self.clock, sleep=self.sleep
        ).start()
        if self.telemetry is not None and any(p.serves_api for p in local.processes):
            self.sampler = Sampler(
                local, self.servers, self.telemetry, clock=self.clock, started=self.launched_at, sleep=self.sleep
            ).start()

    def _open_bench_client(self) -> bench.WarmClient | None:
        """The case's warm bench client, started now, with the run's markers (``afd-e2e cleanup`` and the hygiene
        checks find it and the commands it forks as the case's) and its log beside the case's bench results
        (``bench/<case>/client.log``). None without ``bench_executable``, for an executable that is not vLLM's own
        CLI, or where its interpreter does not start: each command then runs as a process of its own (and fails on
        its own, naming what did not start)."""
        if self.bench_executable is None:
            return None
        env = bench.client_env(
            client_environment(self.base_env, markers=marker_env(self.run_id, self.case.id, bench.PROCESS_NAME))
        )
        log = (
            self.out_dir / "bench" / self.case.id / "client.log" if self.out_dir else self.log_dir / "bench-client.log"
        )
        try:
            return bench.open_client(self.bench_executable, env, log, server=self.case.base_url)
        except OSError:
            return None

    def close_bench_client(self) -> None:
        """End the warm bench client for good (a phase abandoned meanwhile cannot start another)."""
        if self.bench_client is not None:
            self.bench_client.close()

    @property
    def launched_at(self) -> float:
        """When the first process launched, on ``clock``."""
        return self._launch_started

    def wait_ready(self, flag: CancelFlag, budget_s: float | None = None) -> float:
        """Seconds from the first launch until the API answers (raises EngineDied, StartupTimeout or Cancelled)."""
        assert self.watch is not None, "launch() first"
        budget = self.case.startup_timeout_s if budget_s is None else budget_s
        return wait_until_ready(
            self.case.ready_url,
            self.watch,
            self.launched_at,
            budget,
            flag,
            checks=[self._check_startup],
            clock=self.clock,
        )

    def _check_startup(self) -> None:
        stall = self.sampler.watchdog.startup_found if self.sampler else None
        if stall is None or self._startup_stall_seen:
            return
        self._startup_stall_seen = True
        if self.on_startup_stall is None:
            raise Stalled(stall)
        self.on_startup_stall(stall)

    def mark(self, phase: str) -> None:
        """What the case does now (the telemetry's phase boundaries; where the watchdog judges stalls)."""
        if self.sampler is not None:
            self.sampler.mark(phase)

    def check_progress(self) -> None:
        """Raise Stalled once the watchdog has found requests in flight and no token moving for stall_s."""
        if self.sampler is not None and (stall := self.sampler.stall) is not None:
            raise Stalled(stall)

    def timeline(self) -> list[dict[str, Any]]:
        """The telemetry samples taken so far (``Sampler.records``); [] without telemetry."""
        return self.sampler.records() if self.sampler is not None else []

    def diagnose(self) -> str:
        """What the watchdog sees now (a budget timeout's explanation); '' without telemetry."""
        return self.sampler.watchdog.diagnose() if self.sampler is not None else ""

    def keep(self) -> None:
        """Leave every server process up (``--keep-on-stall``): stop sampling and watching, never stop the tree;
        the bench client, which a debugger has no use for, is closed."""
        self.kept = True
        self.close_bench_client()
        if self.watch is not None:
            self.watch.stop()
        if self.sampler is not None:
            self.sampler.stop()

    def check(self) -> None:
        """Raise EngineDied once any role has died (its process exited, its engine died, a fatal log line)."""
        if self.watch is not None:
            self.watch.check()

    def server(self, name: str) -> ServerProcess:
        return next(s for s in self.servers if s.name == name)

    def api_server(self) -> ServerProcess | None:
        """The process serving the API, where this agent hosts it."""
        name = next(p.name for p in self.case.processes if p.serves_api)
        return next((s for s in self.servers if s.name == name), None)

    def api_log_tail(self) -> str | None:
        """The end of the API process's log (a failure's context), or of this agent's first process; None when
        this agent hosts none (the follower's logs come with its records)."""
        server = self.api_server() or next(iter(self.servers), None)
        return log_tail(server.log_path) if server is not None else None

    def stop(self, grace_s: float, cancel: threading.Event | None = None) -> TeardownOutcome:
        """Close the bench client, stop watching, SIGTERM the whole marked tree, SIGKILL what outlives ``grace_s``
        (shortened once ``cancel`` is set); reap the leaders."""
        self.close_bench_client()
        if self.watch is not None:
            self.watch.stop()
        if self.sampler is not None:
            self.sampler.stop()
        self.stopped = terminate(self.find, grace_s, cancel=cancel)
        for server in self.servers:
            server.reap()
        return self.stopped

    def remove_leftovers(self) -> dict[str, str]:
        """After ``stop``: remove the scratch folder and the shared-memory entries the case created (a check record)."""
        self.leftovers = remove_leftover_files(self.scratch, self.shm_before)
        return self.leftovers
