"""The 1 Hz sampler of a running case: each role's ``/metrics``, the requests in flight, the OS state of every
process of the case, each role's log size and, on a GPU machine, every GPU of the case from NVML.

Each sample goes to the watchdog at once and to ``telemetry/<case>.jsonl.gz`` (a header line naming the roles and
their devices, then one line per sample and per phase mark), so a run killed mid-case still leaves its timeline.
Its own CPU time is counted (``cpu_s``): the benchmark reports it against the case's wall time.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import psutil

from afd_e2e.plan.model import CasePlan
from afd_e2e.system.process_state import case_processes, role_processes
from afd_e2e.system.processes import ANSI, ServerProcess
from afd_e2e.system.progress import meaningful
from afd_e2e.telemetry.engine_metrics import EngineMetrics, read_metrics
from afd_e2e.telemetry.gpu_sampler import GpuSampler
from afd_e2e.telemetry.in_flight import client_connections, server_connections
from afd_e2e.telemetry.watchdog import Sample, Stall, Watchdog

SAMPLE_INTERVAL_S = 1.0
TREE_REFRESH_S = 5.0  # how often a role's processes are looked for again (the state of each is read every sample)
FLUSH_EVERY = 10  # samples between flushes of the gzip stream (a killed run keeps all but the last few)


@dataclass(frozen=True)
class TelemetrySettings:
    """What a case's sampler needs from its profile and run."""

    stall_s: float  # budgets.stall_s
    workload_phases: frozenset[str]  # where a stall is judged (the registered phases)
    path: Path | None = None  # telemetry/<case>.jsonl.gz; None keeps the samples in memory only
    interval_s: float = SAMPLE_INTERVAL_S
    at_server: bool = False  # count requests in flight at the server (a follower: its clients are on the leader)


def sample_json(sample: Sample) -> dict[str, Any]:
    return {
        "t": round(sample.t, 3),
        "phase": sample.phase,
        "in_flight": sample.in_flight,
        "metrics": {role: dataclasses.asdict(m) if m else None for role, m in sample.metrics.items()},
        "processes": [
            {
                "pid": p.pid,
                "role": p.role,
                "name": p.name,
                "status": p.status,
                "cpu_s": p.cpu_s,
                "rss_mib": p.rss_mib,
                "leader": p.leader,
            }
            for p in sample.processes
        ],
        "log_lines": sample.log_lines,
        "gpus": [dataclasses.asdict(g) for g in sample.gpus],
    }


def requests_in_flight(api: EngineMetrics | None, tokens_before: float | None, connections: Callable[[], int]) -> int:
    """While the API role's tokens move, its engine's own gauge (running + waiting) is current; when they do not, that
    gauge may be a stopped engine's last snapshot, so the connections open to the API port are counted instead
    (``in_flight.py``: a dump of the kernel's socket table, ~2 ms on an agent, paid only when tokens stand still)."""
    moving = api is not None and api.tokens is not None and tokens_before is not None and api.tokens != tokens_before
    if moving and api is not None and api.running is not None:
        return int(api.running + (api.waiting or 0))
    return connections()


class Sampler:
    """A daemon thread sampling one case from ``start()`` to ``stop()``; ``mark(phase)`` says what the case does."""

    def __init__(
        self,
        case: CasePlan,
        servers: Sequence[ServerProcess],
        settings: TelemetrySettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        started: float | None = None,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        """Samples' times are read on ``clock`` from ``started`` (default: the first server's launch, monotonic);
        between samples the thread waits with ``sleep`` (default: on its stop event). A test drives both, so a
        stall_s of quiet is the clock's, not the machine's."""
        self.case, self.settings = case, settings
        self._clock = clock
        self._servers = list(servers)
        self._api_port = next(p.api_port for p in case.processes if p.serves_api)
        self._api_role = next(p.name for p in case.processes if p.serves_api)
        self._api_tokens: float | None = None
        host = urlsplit(case.base_url).hostname or "127.0.0.1"  # where this agent's processes listen
        self._metrics_urls = {p.name: f"http://{host}:{p.api_port}/metrics" for p in case.processes}
        self._connections = server_connections if settings.at_server else client_connections
        self.watchdog = Watchdog(
            stall_s=settings.stall_s,
            api_role=self._api_role,
            roles=[p.name for p in case.processes],
            workload_phases=settings.workload_phases,
        )
        self.samples: list[Sample] = []
        self.marks: list[tuple[float, str]] = []
        self.cpu_s = 0.0
        self.phase = "startup"
        if started is None:
            started = min(s.launched_at for s in servers) if servers else clock()
        self._started = started
        self._stop = threading.Event()
        self._sleep = self._stop.wait if sleep is None else sleep
        self._lock = threading.Lock()
        self._logs = {s.name: LogLines(s.log_path) for s in servers}
        self._tree: dict[int, tuple[float, list[psutil.Process]]] = {}
        self._gpus = GpuSampler.open(case.devices)
        self._out: IO[str] | None = None
        if settings.path is not None:
            settings.path.parent.mkdir(parents=True, exist_ok=True)
            self._out = gzip.open(settings.path, "wt", encoding="utf-8")  # noqa: SIM115 (closed by stop())
            self._write({"case": case.id, "stall_s": settings.stall_s, "roles": _roles(case)})
        self._thread = threading.Thread(target=self._run, name="afd-e2e-telemetry", daemon=True)

    def start(self) -> Sampler:
        self.mark("startup")
        self._thread.start()
        return self

    def mark(self, phase: str) -> None:
        """A phase boundary: later samples carry ``phase``; the file gets a mark line."""
        with self._lock:
            self.phase = phase
            at = self._clock() - self._started
            self.marks.append((at, phase))
            self._write({"mark": phase, "t": round(at, 3)})

    def records(self) -> list[dict[str, Any]]:
        """The samples taken so far, as the telemetry file has them (``sample_json``), for a phase that judges its
        own stretch of the timeline while the case runs (the soak's leak verdict)."""
        with self._lock:
            return [sample_json(sample) for sample in self.samples]

    @property
    def stall(self) -> Stall | None:
        return self.watchdog.found

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        with self._lock:
            if self._out is not None:
                self._out.close()
                self._out = None
        if self._gpus is not None:
            self._gpus.close()
            self._gpus = None

    def take(self) -> Sample:
        """One sample now (the thread's step; also what a budget timeout's diagnosis reads)."""
        # during start-up no token moves yet, and a role whose API is up must not log a line per sample for it
        urls = {} if self.phase == "startup" else self._metrics_urls
        metrics = {role: read_metrics(url) for role, url in urls.items()}
        return Sample(
            t=self._clock() - self._started,
            phase=self.phase,
            in_flight=self._in_flight(metrics.get(self._api_role)),
            metrics=metrics,
            processes=tuple(case_processes([(s.name, s.pid) for s in self._servers], members=self._members)),
            log_lines={role: log.count() for role, log in self._logs.items()},
            gpus=tuple(self._gpus.read()) if self._gpus is not None else (),
        )

    def _in_flight(self, api: EngineMetrics | None) -> int:
        count = requests_in_flight(api, self._api_tokens, lambda: self._connections(self._api_port))
        if api is not None and api.tokens is not None:
            self._api_tokens = api.tokens
        return count

    def _members(self, leader_pid: int) -> list[psutil.Process]:
        """``role_processes``, looked for again every TREE_REFRESH_S (a new worker is seen within seconds)."""
        now = self._clock()
        cached = self._tree.get(leader_pid)
        if cached is None or now - cached[0] >= TREE_REFRESH_S:
            cached = self._tree[leader_pid] = (now, role_processes(leader_pid))
        return cached[1]

    def _run(self) -> None:
        due = self._clock()
        while not self._stop.is_set():
            began = time.thread_time()
            sample = self.take()
            with self._lock:
                self.samples.append(sample)
                self._write(sample_json(sample), flush=len(self.samples) % FLUSH_EVERY == 0)
                if (found := self.watchdog.observe(sample)) is not None:
                    self._write({"stall": found.kind, "t": round(found.at_s, 3), "message": found.message}, flush=True)
            self.cpu_s += time.thread_time() - began
            # on a fixed cadence: a sample's own time must not stretch the interval (30 intervals of 1.05 s put a
            # stall's verdict 1.5 s past stall_s)
            due = max(due + self.settings.interval_s, self._clock())
            self._sleep(due - self._clock())

    def _write(self, record: dict[str, Any], *, flush: bool = False) -> None:
        if self._out is not None:
            self._out.write(json.dumps(record, separators=(",", ":")) + "\n")
            if flush:
                self._out.flush()


def _roles(case: CasePlan) -> dict[str, Any]:
    return {p.name: {"role": p.role, "devices": list(p.devices), "serves_api": p.serves_api} for p in case.processes}


class LogLines:
    """A role's log as it grows: how many meaningful lines it has (HTTP access lines, such as the watch's own
    ``/health`` probes, and progress-bar redraws do not count: they say nothing about progress)."""

    def __init__(self, path: Path) -> None:
        self.path, self._offset, self._partial, self._lines = path, 0, "", 0

    def count(self) -> int:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except OSError:
            return self._lines
        self._offset += len(data)
        *lines, self._partial = (self._partial + data.decode("utf-8", errors="replace")).split("\n")
        self._lines += sum(meaningful(ANSI.sub("", line.split("\r")[-1])) is not None for line in lines)
        return self._lines


@dataclass
class Timeline:
    """A telemetry file read back."""

    header: dict[str, Any] = dataclasses.field(default_factory=dict)
    samples: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    marks: list[tuple[float, str]] = dataclasses.field(default_factory=list)  # (t, phase)
    stalls: list[tuple[float, str]] = dataclasses.field(default_factory=list)  # (t, message)


def read_telemetry(path: Path) -> Timeline:
    """A telemetry file back: its header, samples (as written), phase marks and stalls; a file cut short by a
    killed run keeps what was flushed."""
    timeline = Timeline()
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        try:
            for line in handle:
                record = json.loads(line)
                if "case" in record:
                    timeline.header = record
                elif "mark" in record:
                    timeline.marks.append((record["t"], record["mark"]))
                elif "stall" in record:
                    timeline.stalls.append((record["t"], record["message"]))
                else:
                    timeline.samples.append(record)
        except (EOFError, OSError, json.JSONDecodeError):
            pass
    return timeline
