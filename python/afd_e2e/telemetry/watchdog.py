"""The progress watchdog, judged on the sampler's samples (pure: tests feed it samples).

- **Stall** (a workload phase): requests in flight on the workload's side and no token counter of the API role
  moving for ``budgets.stall_s``. A slow engine moves its counters every step, so it is never a stall. Nor is an
  engine blocked on its compiler: the first request of a new shape (the first top-k logprobs, a TP2 step) makes torch
  inductor compile a kernel, and on the CPU engine its g++ runs for tens of seconds while no token moves
  (``compiling``; on a loaded agent the compiler may get a few % of a core, and runnable and gaining CPU it still
  compiles).
- **Start-up stall**: every role alive, and none of them has logged a line, used CPU or compiled for ``stall_s``.
- Neither while the machine starves the case (``starved``): a process of the case that spent at least half of a
  sample interval runnable but waiting for a CPU (its run delay) was kept from working by the machine, not by the
  engine. The 12-06 CI run, its embedded default at nice 10 on 2 cores with a load of ~10, read "1 requests in
  flight, no token for 10 s; EngineCore is sleeping": the API server had the request and no CPU to pass it on. A
  starved interval restarts the quiet time, so a stall is ``stall_s`` of silence the machine did not cause; a
  process spinning on a starved machine is excused too, and left to the phase's budget (whose diagnosis names it).

Either way the explanation names the role and the process whose OS state explains it: a stopped process first,
then a zombie, one in disk wait, one spinning a core, else the engine process that sat idle (in AFD the FFN role,
which serves no tokens of its own, is judged by this alone).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from afd_e2e.system.process_state import ProcessState
from afd_e2e.telemetry.engine_metrics import EngineMetrics

ENGINE_NAMES = ("EngineCore", "Worker")  # vLLM's own processes (setproctitle); the API server is the role's leader
# samples come on a fixed 1 s cadence, so N intervals measure N s give or take a few ms: without the slack a stall
# of exactly stall_s would wait for one sample more
CADENCE_SLACK_S = 0.05
IDLE_CPU_FRACTION = 0.05  # a role using less than 5% of one core over the window "used no CPU"
BUSY_CPU_FRACTION = 0.9  # a process using 90% of a core while nothing moves is spinning
STARVED_FRACTION = 0.5  # a process runnable but without a CPU for half an interval was starved by the machine
JUDGED_STATUSES = (("stopped", "is stopped"), ("tracing-stop", "is stopped by a tracer"), ("zombie", "is a zombie"))
NEVER_PROGRESSING = frozenset(status for status, _ in JUDGED_STATUSES)


@dataclass(frozen=True)
class Sample:
    """One look at a case, ``t`` seconds after its launch."""

    t: float
    phase: str
    in_flight: int  # client connections open to the API port
    metrics: dict[str, EngineMetrics | None]  # role (plan name) -> its /metrics, None when it did not answer
    processes: tuple[ProcessState, ...]
    log_lines: dict[str, int]  # role -> meaningful lines its log has so far (not HTTP access lines)
    gpus: tuple = ()  # GpuSample per device

    def cpu_by_pid(self) -> dict[int, float]:
        return {p.pid: p.cpu_s for p in self.processes}


@dataclass(frozen=True)
class Stall:
    """What the watchdog found: ``kind`` is "stall" or "startup"; ``message`` is the failure's words."""

    kind: str
    phase: str
    in_flight: int
    quiet_s: float
    culprit: str  # "ffn EngineCore_DP0 pid 12 is stopped"
    at_s: float  # since launch
    message: str


def explain(first: Sample, last: Sample) -> str:
    """The process whose state explains that nothing moved between two samples (see the module docstring)."""
    window = max(last.t - first.t, 1e-6)
    before = first.cpu_by_pid()
    for status, words in JUDGED_STATUSES:
        if found := [p for p in last.processes if p.status == status]:
            return _describe(found[0], words)
    if found := [p for p in last.processes if p.status == "disk-sleep"]:
        return _describe(found[0], "is in disk wait (D)")
    used = {p.pid: p.cpu_s - before.get(p.pid, p.cpu_s) for p in last.processes}
    busy = [p for p in last.processes if used[p.pid] >= BUSY_CPU_FRACTION * window]
    if busy:
        top = max(busy, key=lambda p: used[p.pid])
        return _describe(top, f"is {top.status}, spinning ({used[top.pid]:.1f} CPU-s in {window:.0f} s)")
    engines = [p for p in last.processes if not p.leader] or list(last.processes)
    if not engines:
        return "no process of the case is left"
    # Among the processes that sat idle (CPU time is counted in clock ticks, so "idle" is a fraction of a core, not
    # exactly 0.0), vLLM's own come first, the EngineCore before its workers: a helper beside them (multiprocessing's
    # resource tracker) is always idle and explains nothing. Else the least busy.
    idle = [p for p in engines if used[p.pid] < IDLE_CPU_FRACTION * window]
    quietest = min(idle or engines, key=lambda p: (_engine_rank(p) if idle else 0, used[p.pid]))
    # The state letter is one instant's: an idle process that woke for a tick as it was sampled reads "running".
    # Over the window it slept (its CPU time says so), and that is what explains the stall.
    status = "sleeping" if quietest in idle and quietest.status == "running" else quietest.status
    return _describe(quietest, f"is {status} ({used[quietest.pid]:.1f} CPU-s in {window:.0f} s)")


def _engine_rank(process: ProcessState) -> int:
    """0 for vLLM's EngineCore, 1 for its other processes (workers), 2 for any other process."""
    return next((rank for rank, name in enumerate(ENGINE_NAMES) if name in process.name), len(ENGINE_NAMES))


def compiling(before: Sample, after: Sample) -> bool:
    """Whether a process of the case compiled between two samples: a compiler it waited for has exited (its
    children's CPU rose), or a process that is none of vLLM's own (a g++, a compile worker) used CPU. Never while a
    process is stopped or a zombie: that explains the silence instead. A spinning engine (an NCCL wait) is vLLM's
    own process, so it is not excused."""
    if any(p.status in NEVER_PROGRESSING for p in after.processes):
        return False
    window = max(after.t - before.t, 1e-6)
    earlier = {p.pid: p for p in before.processes}
    for process in after.processes:
        previous = earlier.get(process.pid)
        if previous is not None and process.children_cpu_s > previous.children_cpu_s:
            return True
        helper = not process.leader and not any(name in process.name for name in ENGINE_NAMES)
        used = process.cpu_s - (previous.cpu_s if previous is not None else 0.0)
        # A compiler starved of CPU (a loaded agent: the 12-06 CI's cc1plus got 4% of a core) is runnable at both
        # ends of the window and still gains CPU: it compiles, slowly. An idle helper (the resource tracker) sleeps.
        runnable = previous is not None and previous.status == process.status == "running" and used > 0
        if helper and (used >= IDLE_CPU_FRACTION * window or runnable):
            return True
    return False


def starved(before: Sample, after: Sample) -> bool:
    """Whether the machine kept a process of the case from running for at least ``STARVED_FRACTION`` of the time
    between two samples (its run delay grew by that much): nothing moving then says nothing about the engine."""
    window = max(after.t - before.t, 1e-6)
    earlier = {p.pid: p.run_delay_s for p in before.processes}
    return any(p.run_delay_s - earlier[p.pid] >= STARVED_FRACTION * window for p in after.processes if p.pid in earlier)


def _describe(process: ProcessState, words: str) -> str:
    return f"{process.role} {process.name} pid {process.pid} {words}"


@dataclass
class Watchdog:
    """Fed every sample (``observe``); ``found`` holds the first stall or start-up stall."""

    stall_s: float
    api_role: str
    roles: Sequence[str]
    workload_phases: frozenset[str]
    found: Stall | None = None
    startup_found: Stall | None = None
    _anchor: Sample | None = None  # the sample since which requests were in flight and no token moved
    # the fewest requests in flight in any sample since the anchor: a connection counted at one instant only (the
    # death watch's /health probe, a /metrics scrape, caught open by a slow machine) is not a request that waits
    _held: int = 0
    _tokens: float | None = None
    _phase: str = ""
    _history: deque = field(default_factory=deque)
    _last: Sample | None = None
    _previous: Sample | None = None  # the sample before this one in the same workload phase

    def observe(self, sample: Sample) -> Stall | None:
        """Judge one more sample; returns a stall the first time one is found."""
        self._previous = self._last if self._last is not None and self._last.phase == sample.phase else None
        self._last = sample
        if sample.phase != self._phase:
            self._phase, self._anchor = sample.phase, None
            self._history.clear()
        if sample.phase == "startup":
            return self._startup(sample)
        if sample.phase in self.workload_phases:
            return self._progress(sample)
        return None

    def _progress(self, sample: Sample) -> Stall | None:
        metrics = sample.metrics.get(self.api_role)
        tokens = metrics.tokens if metrics else None
        moved = tokens is not None and self._tokens is not None and tokens != self._tokens
        busy = self._previous is not None and (compiling(self._previous, sample) or starved(self._previous, sample))
        moved = moved or busy
        if tokens is not None:
            self._tokens = tokens
        if sample.in_flight <= 0 or moved:
            self._anchor = sample if sample.in_flight > 0 else None
            self._held = sample.in_flight
            return None
        if self._anchor is None:
            self._anchor, self._held = sample, sample.in_flight
            return None
        self._held = min(self._held, sample.in_flight)
        quiet_s = sample.t - self._anchor.t
        if quiet_s < self.stall_s - CADENCE_SLACK_S or self.found is not None:
            return None
        culprit = explain(self._anchor, sample)
        message = (
            f"engine stalled during {sample.phase}: {self._held} requests in flight, "
            f"no token for {quiet_s:.0f} s (budgets.stall_s = {self.stall_s:g} s); {culprit}"
        )
        self.found = Stall("stall", sample.phase, self._held, round(quiet_s, 1), culprit, sample.t, message)
        return self.found

    def _startup(self, sample: Sample) -> Stall | None:
        self._history.append(sample)
        while len(self._history) > 1 and sample.t - self._history[1].t >= self.stall_s - CADENCE_SLACK_S:
            self._history.popleft()
        first = self._history[0]
        quiet_s = sample.t - first.t
        if self.startup_found is not None or quiet_s < self.stall_s - CADENCE_SLACK_S:
            return None
        leaders = {p.role for p in sample.processes if p.leader and p.status not in ("zombie", "dead")}
        if not set(self.roles) <= leaders:
            return None  # a role is gone: the death watch names it
        if any(sample.log_lines.get(r, 0) != first.log_lines.get(r, 0) for r in self.roles) or compiling(first, sample):
            return None
        if any(starved(a, b) for a, b in zip(self._history, list(self._history)[1:], strict=False)):
            return None  # the machine, not the engine, held it back in some interval of the window
        before = first.cpu_by_pid()
        for role in self.roles:
            # a process born inside the window (vLLM's worker, spawned while the EngineCore waits on it) used all of
            # its CPU there: counted from 0, or its import would read as a silent start-up
            used = sum(p.cpu_s - before.get(p.pid, 0.0) for p in sample.processes if p.role == role)
            if used >= IDLE_CPU_FRACTION * quiet_s:
                return None
        waits = "; ".join(explain(first, _only(sample, role)) for role in self.roles)
        message = (
            f"start-up stalled: no role logged a line or used CPU for {quiet_s:.0f} s "
            f"(budgets.stall_s = {self.stall_s:g} s); {waits}"
        )
        self.startup_found = Stall("startup", "start-up", 0, round(quiet_s, 1), waits, sample.t, message)
        return self.startup_found

    def diagnose(self) -> str:
        """For a budget timeout: what the last samples show (in flight, the quiet time, the explaining process)."""
        last = self._last
        if last is None:
            return ""
        if self._anchor is None:
            return f"{last.in_flight} requests in flight, tokens still moving"
        quiet_s = last.t - self._anchor.t
        return f"{last.in_flight} requests in flight, no token for {quiet_s:.0f} s; {explain(self._anchor, last)}"


def _only(sample: Sample, role: str) -> Sample:
    processes = tuple(p for p in sample.processes if p.role == role)
    return Sample(sample.t, sample.phase, sample.in_flight, sample.metrics, processes, sample.log_lines)
