"""One case, start to finish: launch its processes, wait for readiness, run its phases, stop it, check hygiene.

Whatever happens in between (a role dying, a phase over its budget, a failed phase, a cancel, a bug in the harness)
the case is torn down, checked and recorded; nothing escapes as an exception. Every role is watched from launch to
teardown (``watch.py``), so a death ends whatever phase runs within seconds, naming the role and its root cause.
Every case is also sampled about once a second (``afd_e2e.telemetry``): a stall (requests in flight, no token
moving for ``budgets.stall_s``) ends the phase within ``stall_s`` + 2 s naming the process whose state explains it,
a budget timeout gets the same diagnosis, and both take forensics (every process's stack) before the teardown.
With ``keep_on_stall`` a stalled case's processes are left up for a debugger instead.

A case placed on several agents runs here on each of them with its ``AgentSide`` (``afd_e2e.multi_agent``): the
leader meets its followers before it launches its own processes and watches theirs with its own; a follower
launches the one process it hosts and watches it until the leader ends the case. Both take the same teardown,
hygiene and records; the leader merges its followers' records into its own.

A phase runs in a worker thread and writes its results sections through a ``PhaseWrites``: once the phase is over
(finished or abandoned) its thread can no longer write, so an abandoned phase never races the results being saved.
"""

from __future__ import annotations

import copy
import shlex
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import ClassVar, Protocol
from urllib.parse import urlsplit

from afd_e2e.buildkite.env import agent_name
from afd_e2e.errors import UsageError
from afd_e2e.execution.judge import judge_case
from afd_e2e.forensics import Trigger, capture_case
from afd_e2e.plan.model import CasePlan, RunPlan
from afd_e2e.profile import Profile, catalogue
from afd_e2e.results import result_sections
from afd_e2e.results.model import CaseResults, CheckRecord, PreflightCheck, ProcessRecord
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.results.redaction import redact_argv, redact_env
from afd_e2e.results.status import Status
from afd_e2e.results.store import ResultsStore
from afd_e2e.runner import dispatch
from afd_e2e.runner.cancellation import CANCEL_GRACE_S, CancelFlag, Cancelled, call_watched
from afd_e2e.runner.hygiene import (
    NOTHING_HERE,
    GpuSnapshot,
    check_forced_kill,
    check_gpu_memory,
    check_ports,
    check_processes,
    read_gpu_memory,
    record,
)
from afd_e2e.runner.layout import RunLayout
from afd_e2e.runner.readiness import StartupTimeout
from afd_e2e.runner.run_record import RunRecord
from afd_e2e.runner.server import CaseServers, LaunchFailed, Stalled
from afd_e2e.runner.side import SideFailed
from afd_e2e.runner.watch import EngineDied
from afd_e2e.system.child_env import client_environment
from afd_e2e.system.executables import resolve_executable
from afd_e2e.system.markers import marker_env
from afd_e2e.system.ports import shut_own_connections
from afd_e2e.system.processes import ServerProcess, log_tail
from afd_e2e.system.progress import Progress
from afd_e2e.telemetry.sampler import TelemetrySettings
from afd_e2e.telemetry.summary import stall_record, summarize, telemetry_path
from afd_e2e.telemetry.watchdog import Stall
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome

DEATH_SETTLE_S = 1.0  # a phase that failed because its server just died: time for the watch to name the role


class AgentSide(Protocol):
    """This agent's part in a case placed on several agents (``multi_agent.leader``, ``multi_agent.follower``)."""

    waits_ready: bool  # the leader waits for the API; a follower only launches
    runs_phases: bool  # the leader runs the phases; a follower watches until the leader ends the case

    def hosted(self, case: CasePlan) -> frozenset[str]: ...

    def join(
        self, servers: CaseServers, flag: CancelFlag, record_checks: Callable[[Sequence[PreflightCheck]], None]
    ) -> None: ...

    def launched(self, servers: CaseServers) -> None: ...

    def follow(self, servers: CaseServers, flag: CancelFlag) -> None: ...

    def mark(self, phase: str) -> None: ...

    def failed(self, results: CaseResults, trigger: str | None) -> None: ...

    def case_over(self, results: CaseResults) -> None: ...

    def collect(self, case: CasePlan, results: CaseResults, out_dir: Path) -> None: ...

    def run_over(self, status: Status) -> None: ...


@dataclass(frozen=True)
class RunContext:
    """Everything a case needs from its run."""

    profile: Profile
    plan: RunPlan
    run_id: str
    layout: RunLayout
    store: ResultsStore
    record: RunRecord
    progress: Progress
    flag: CancelFlag
    executables: Mapping[str, str]  # plan argv[0] -> resolved executable
    base_env: Mapping[str, str]
    gsm8k_dir: Path | None
    keep_on_stall: bool = False  # leave a stalled case's processes up (debugging; refused in CI)
    side: AgentSide | None = None  # this agent's part in the cases placed on several agents
    # What a case's start-up and phase budgets, telemetry samples (stall_s), timings, a refused /health
    # (watch.REFUSED_FOR_S) and abandoned work's wind-down (cancellation.STOP_JOIN_S) are read on, and how the sampler
    # waits between samples, the watch for a dead role's traceback (watch.LOG_SETTLE_S) and the wind-down (None: on
    # their stop events, or a join): tests drive both, so a slow machine spends no budget.
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], object] | None = None

    def side_of(self, case: CasePlan) -> AgentSide | None:
        return self.side if case.remote_processes else None


class CaseFailure(Exception):
    """A case's failure; ``forensics``: what to take the stacks of its processes for before the teardown (a death, a
    budget timeout, a stall), None when the processes explain nothing (a wrong answer, a launch that failed)."""

    def __init__(self, message: str, log_tail: str | None = None, forensics: Trigger | None = None) -> None:
        super().__init__(message)
        self.log_tail = log_tail
        self.forensics = forensics


class OverBudget(Exception):
    """A phase ran past its budget from the profile's ``budgets`` section."""


def new_case_results(case: CasePlan, status: Status = Status.RUNNING, failure: str | None = None) -> CaseResults:
    return CaseResults(id=case.id, label=case.label, kind=case.kind, status=status, failure=failure)


def _fail(results: CaseResults, status: Status, failure: str, log_tail: str | None = None) -> None:
    results.status, results.failure = status, failure
    if log_tail is not None:
        results.log_tail = log_tail


class PhaseWrites:
    """A phase's results sections, written into a scratch ``CaseResults`` of its own and copied into its case's
    results (under the store's lock) on every flush while the phase is open. Once closed, flushes from the
    phase's thread go nowhere, so an abandoned phase never races the results being saved."""

    IN_FLIGHT: ClassVar[dict[Status, tuple[Status, ...]]] = {
        Status.CANCELLED: (Status.RUNNING, Status.FAILED),
        Status.FAILED: (Status.RUNNING, Status.CANCELLED),
    }

    def __init__(self, case_results: CaseResults, store: ResultsStore) -> None:
        self.sections = CaseResults(id=case_results.id, label=case_results.label, kind=case_results.kind)
        self._case = case_results
        self._store = store
        self._written: set[str] = set()
        self._open = True

    def flush(self) -> None:
        with self._store.lock:
            if not self._open:
                return
            for name in result_sections.written_sections():
                if (section := self.sections.section(name)) is not None:
                    self._case.set_section(name, copy.deepcopy(section))
                    self._written.add(name)
            self._store.flush()

    def close(self, stopped_as: Status | None = None, why: str = "") -> None:
        """No more writes; a phase stopped from outside has its unfinished sections marked ``stopped_as``
        (``cancelled`` for a cancel, whatever failed on the way included; ``failed`` for a death or an overrun)."""
        with self._store.lock:
            self._open = False
            for name in sorted(self._written) if stopped_as else ():
                section = self._case.section(name)
                if getattr(section, "status", None) in self.IN_FLIGHT[stopped_as]:
                    was = section.failure
                    section.status, section.failure = stopped_as, why + (f" (in flight: {was})" if was else "")
            self._store.flush()


def run_case(
    ctx: RunContext, case: CasePlan, while_up: Callable[[CaseServers, CaseResults], None] | None = None
) -> CaseResults:
    """Run one case; its results section is written as it goes and returned. ``while_up``: called once its phases
    passed, before its teardown, with its servers still up (``runner.series_servers``: a series, the cases a held
    baseline waits for); a role that died meanwhile, or a performance section it failed, fails the case."""
    started = ctx.clock()
    results = ctx.store.results.cases[case.id] = new_case_results(case)
    ctx.store.flush()
    side = ctx.side_of(case)

    def body(servers: CaseServers) -> None:
        if side is not None and not side.runs_phases:
            _follow(ctx, results, servers, side)
            return
        _run_phases(ctx, servers.case, results, servers, side)
        if while_up is not None and side is None:
            _while_up(ctx, results, servers, while_up)

    _serve(ctx, case, results, body, name=case.id, side=side, benches=dispatch.benches(case.phases))
    if side is None or side.runs_phases:
        _judge_execution(ctx, case, results)
    results.timings.wall_s = round(ctx.clock() - started, 3)
    ctx.store.flush()
    ctx.progress(f"case {results.status}" + (f": {results.failure}" if results.failure else ""))
    return results


def run_block(
    ctx: RunContext, case: CasePlan, block: str, work: Callable[[CaseServers, threading.Event], None]
) -> CaseResults:
    """One more launch of ``case`` for a block of a ``blocks`` series (``runner.series_servers``): launched and made
    ready, ``work`` run watched like a phase (a cancel, a dead role or a stall ends it; its event tells it to stop),
    then stopped and checked for hygiene like the case itself. Everything lands in a record of its own, returned
    (processes, timings, hygiene, status; logs under the case's folder, named ``block``): the case's record is
    the caller's to update."""
    results = new_case_results(case)

    def body(servers: CaseServers) -> None:
        name = f"{case.id} {block}"
        ctx.progress.enter(name, "performance series", [s.log_path for s in servers.servers])
        servers.mark("performance")
        stop = threading.Event()

        def alive() -> None:
            try:
                servers.check()
                servers.check_progress()
            except EngineDied as exc:
                raise died(servers, exc, f"performance series ({block})") from exc
            except Stalled as exc:
                raise CaseFailure(exc.stall.message, servers.api_log_tail(), Trigger.STALL) from exc

        try:
            call_watched(lambda: work(servers, stop), [ctx.flag.check, alive], stop, clock=ctx.clock, sleep=ctx.sleep)
        finally:
            if (port := urlsplit(servers.case.base_url).port) is not None:
                shut_own_connections(port)  # an abandoned repetition's requests: the SIGTERM would wait on them
        servers.check()
        results.status = Status.PASSED

    _serve(ctx, case, results, body, name=f"{case.id}/{block}", side=None, benches=True)
    return results


def _serve(
    ctx: RunContext,
    case: CasePlan,
    results: CaseResults,
    body: Callable[[CaseServers], None],
    *,
    name: str,
    side: AgentSide | None,
    benches: bool,
) -> None:
    """The one server lifecycle of a case (or a block of one): launch its processes, make them ready, run
    ``body``, then stop them and check hygiene, whatever happened in between; every failure is recorded in
    ``results``, nothing escapes. ``name``: the folder of its logs, scratch and telemetry. ``benches``: ``body``
    runs ``vllm bench serve`` (a phase that benches, a block): where this agent runs it (not a follower's), the
    case's warm bench client starts with its processes and is closed in their stop, before the hygiene checks."""
    hosted = side.hosted(case) if side is not None else None
    runs_bench = benches and (side is None or side.runs_phases)
    gpu_before = read_gpu_memory(d for p in case.processes if hosted is None or p.name in hosted for d in p.devices)
    with CaseServers(
        case,
        ctx.layout.log_dir(name),
        scratch=ctx.layout.case_scratch(name),
        cache=ctx.layout.cache_dir,
        run_id=ctx.run_id,
        base_env=ctx.base_env,
        executables=ctx.executables,
        on_launch=partial(_launched, ctx, case, results),
        out_dir=ctx.layout.out_dir,
        telemetry=TelemetrySettings(
            stall_s=ctx.profile.budgets.stall_s,
            workload_phases=dispatch.stall_watched_phases(),
            path=telemetry_path(ctx.layout.out_dir, name),
            at_server=side is not None and not side.runs_phases,
        ),
        hosted=hosted,
        bench_executable=_bench_executable(ctx) if runs_bench else None,
        clock=ctx.clock,
        sleep=ctx.sleep,
    ) as servers:
        if ctx.profile.engine.on_startup_stall == "wait":
            servers.on_startup_stall = partial(_startup_stall_reported, ctx, case, results, servers)
        try:
            _start(ctx, case, results, servers, side)
            body(servers)
        except CaseFailure as exc:
            _fail(results, Status.FAILED, str(exc), exc.log_tail)
            ctx.store.flush()  # the failure is on record when detected, not only after the teardown
            if side is not None:  # the other agents learn of it at once
                side.failed(results, str(exc.forensics) if exc.forensics is not None else None)
            if exc.forensics is not None:
                _take_forensics(ctx, case, results, servers, exc.forensics, str(exc))
        except Cancelled as exc:
            _fail(results, Status.CANCELLED, str(exc) or "cancelled")
            if side is not None:
                side.failed(results, None)
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            _fail(results, Status.CRASHED, f"harness error: {type(exc).__name__}: {exc}")
        try:
            if side is not None:
                side.case_over(results)
            if servers.kept:
                _kept(ctx, results, servers)
            else:
                _stop_and_check(ctx, servers.local, results, servers, gpu_before)
            if side is not None:
                side.collect(case, results, ctx.layout.out_dir)
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            _fail(results, Status.CRASHED, f"harness error while stopping: {type(exc).__name__}: {exc}")
        _summarize_telemetry(ctx, case, results, servers)


def _bench_executable(ctx: RunContext) -> str | None:
    """The ``vllm`` the case's bench commands run; None where it does not resolve (no warm client: the phase that
    benches resolves it itself and fails naming it)."""
    try:
        return resolve_executable(ctx.profile.engine.executable)
    except UsageError:
        return None


def _launched(
    ctx: RunContext, case: CasePlan, results: CaseResults, server: ServerProcess, env: Mapping[str, str]
) -> None:
    ctx.record.add_process(case.id, server.name, server.pid)
    results.processes.append(
        ProcessRecord(
            name=server.name,
            pid=server.pid,
            argv=redact_argv(server.argv),
            env=redact_env(env),
            log=ctx.layout.relative(server.log_path),
            agent=agent_name(ctx.base_env),
        )
    )
    ctx.store.flush()
    ctx.progress(f"launched {server.name} (pid {server.pid}): {shlex.join(server.argv)}")


def _take_forensics(
    ctx: RunContext, case: CasePlan, results: CaseResults, servers: CaseServers, trigger: Trigger, reason: str
) -> None:
    """The stacks and state of every process of the case still alive (bounded in time), recorded before teardown;
    nothing where this agent hosts none (a follower takes its own)."""
    if not servers.servers:
        return
    ctx.progress(f"forensics ({trigger}): dumping the stacks of every process of the case")
    taken = capture_case(servers, trigger=trigger, reason=reason, out_dir=ctx.layout.out_dir)
    with ctx.store.lock:  # also called from a phase's thread (a bench repetition that timed out)
        results.forensics.append(taken)
        ctx.store.flush()
    dumped = sum(1 for p in taken.processes if p.mode)
    ctx.progress(f"forensics: {dumped} of {len(taken.processes)} processes dumped in {taken.seconds:.2f} s")


def _while_up(
    ctx: RunContext, results: CaseResults, servers: CaseServers, while_up: Callable[[CaseServers, CaseResults], None]
) -> None:
    while_up(servers, results)
    try:
        servers.check()
    except EngineDied as exc:
        raise died(servers, exc, "held up for a sequential series") from exc
    performance = results.section(PERFORMANCE)
    if performance is not None and performance.status is Status.CANCELLED:
        raise Cancelled(f"performance: {performance.failure or 'cancelled'}")
    if performance is not None and performance.status.is_failure:
        raise CaseFailure(f"performance: {performance.failure or performance.status}", servers.api_log_tail())


def died(servers: CaseServers, exc: EngineDied, phase: str) -> CaseFailure:
    """The case's failure for a dead role: the role, the phase, the sign and the root cause, its log's tail."""
    return CaseFailure(exc.death.describe(phase), log_tail(servers.log_path(exc.death.role)), Trigger.DEATH)


def _record_agent_checks(ctx: RunContext, checks: Sequence[PreflightCheck]) -> None:
    """Checks only a case's rendezvous can make (the same software on every agent) join the run's preflight, so
    they reach JUnit and the annotation as every agent check does; a failed one fails the preflight."""
    with ctx.store.lock:
        preflight = ctx.store.results.preflight
        if preflight is None:
            return
        preflight.checks.extend(checks)
        if any(check.status is Status.FAILED for check in checks):
            preflight.status = Status.FAILED
        ctx.store.flush()


def _start(ctx: RunContext, case: CasePlan, results: CaseResults, servers: CaseServers, side: AgentSide | None) -> None:
    ctx.progress.enter(case.id, "startup", [servers.log_path(p.name) for p in servers.local.processes])
    try:
        if side is not None:
            side.join(servers, ctx.flag, partial(_record_agent_checks, ctx))
        servers.launch(ctx.flag)
        if side is not None:
            side.launched(servers)
            if not side.waits_ready:
                return
        ready_s = servers.wait_ready(ctx.flag)
    except SideFailed as exc:
        raise CaseFailure(str(exc)) from exc
    except LaunchFailed as exc:
        raise CaseFailure(str(exc)) from exc
    except EngineDied as exc:
        raise died(servers, exc, "start-up") from exc
    except StartupTimeout as exc:
        raise CaseFailure(str(exc), servers.api_log_tail(), Trigger.TIMEOUT) from exc
    except Stalled as exc:
        ctx.progress(exc.stall.message)
        raise CaseFailure(exc.stall.message, servers.api_log_tail(), Trigger.STARTUP) from exc
    results.timings.launch_to_ready_s = round(ready_s, 3)
    ctx.store.flush()
    ctx.progress(f"ready after {ready_s:.1f} s at {servers.case.base_url}")


def _follow(ctx: RunContext, results: CaseResults, servers: CaseServers, side: AgentSide) -> None:
    """A follower: its process watched until the leader ends the case (a death or a stall fails it here)."""
    ctx.progress.enter(results.id, "follow", [s.log_path for s in servers.servers])
    try:
        side.follow(servers, ctx.flag)
    except EngineDied as exc:
        raise died(servers, exc, "the leader's case") from exc
    except Stalled as exc:
        ctx.progress(exc.stall.message)
        raise CaseFailure(exc.stall.message, servers.api_log_tail(), Trigger.STALL) from exc
    except SideFailed as exc:
        raise CaseFailure(str(exc)) from exc
    results.status = Status.PASSED


def _run_phases(
    ctx: RunContext, case: CasePlan, results: CaseResults, servers: CaseServers, side: AgentSide | None = None
) -> None:
    """In plan order; a failed phase ends the case only where its descriptor says so (a server that does not
    answer: nothing else makes sense); a failed workload phase does not stop the next one."""
    failures = []
    for phase in case.phases:
        ctx.flag.check()
        try:
            servers.check()
        except EngineDied as exc:
            raise died(servers, exc, phase) from exc
        ctx.progress.enter(case.id, phase, [s.log_path for s in servers.servers])
        servers.mark(phase)
        if side is not None:
            side.mark(phase)
        outcome = _run_phase(ctx, case, results, servers, phase)
        if outcome.status.is_failure:
            failure = f"{phase}: {outcome.failure or outcome.status}"
            if dispatch.RUNS[phase].ends_case:
                raise CaseFailure(failure, servers.api_log_tail())
            failures.append(failure)
    try:
        servers.check()
    except EngineDied as exc:
        raise died(servers, exc, case.phases[-1] if case.phases else "start-up") from exc
    if failures:
        raise CaseFailure("; ".join(failures), servers.api_log_tail())
    results.status = Status.PASSED


def _run_phase(ctx: RunContext, case: CasePlan, results: CaseResults, servers: CaseServers, phase: str) -> PhaseOutcome:
    """One phase in a worker thread, watched: a cancel, a dead role or an overrun budget abandons it at once."""
    writes = PhaseWrites(results, ctx.store)
    stop = threading.Event()  # tells the phase's own work to end (set when the phase is abandoned)
    budget = catalogue.phase(phase).budget
    budget_key, budget_s = budget.label, budget.seconds(ctx.profile)
    started = ctx.clock()

    def within_budget() -> None:
        if ctx.clock() - started > budget_s:
            raise OverBudget(f"{phase} ran past its budget ({budget_key} = {budget_s:g} s)")

    def on_record(failure: CaseFailure) -> None:
        """The case's failure saved when found: winding the phase's work down may take seconds (STOP_JOIN_S), and
        whoever reads results.json meanwhile (a CI user, a leader's follower) learns of it now."""
        with ctx.store.lock:
            _fail(results, Status.FAILED, str(failure), failure.log_tail)
            ctx.store.flush()

    def death_checked() -> None:
        try:
            servers.check()
        except EngineDied as exc:
            on_record(died(servers, exc, phase))
            raise

    def progress_checked() -> None:
        try:
            servers.check_progress()
        except Stalled as exc:
            ctx.progress(exc.stall.message)
            on_record(CaseFailure(exc.stall.message, servers.api_log_tail()))
            raise

    take = partial(_take_forensics, ctx, case, results, servers)
    work = partial(dispatch.RUNS[phase].run, _phase_context(ctx, case, writes, stop, take, servers))
    stopped_as, why = None, ""
    try:
        checks = [ctx.flag.check, death_checked, progress_checked, within_budget]
        outcome = call_watched(work, checks, stop, clock=ctx.clock, sleep=ctx.sleep)
        if outcome.status.is_failure and servers.watch is not None:
            servers.watch.dead.wait(DEATH_SETTLE_S)  # a request refused by a dying server: name the role instead
            servers.check()
            ctx.flag.check()  # what failed because the run is being cancelled is cancelled
        return outcome
    except Cancelled as exc:
        stopped_as, why = Status.CANCELLED, str(exc) or "cancelled"
        raise
    except EngineDied as exc:
        stopped_as, why = Status.FAILED, f"stopped: {exc.death.role} died"
        raise died(servers, exc, phase) from exc
    except Stalled as exc:
        stopped_as, why = Status.FAILED, f"stopped: {exc.stall.message}"
        if ctx.keep_on_stall:
            servers.keep()
            _print_attach(ctx, servers)
        raise CaseFailure(exc.stall.message, servers.api_log_tail(), Trigger.STALL) from exc
    except OverBudget as exc:
        diagnosis = servers.diagnose()
        failure = f"{exc}; {diagnosis}" if diagnosis else str(exc)
        stopped_as, why = Status.FAILED, f"stopped: {failure}"
        raise CaseFailure(failure, servers.api_log_tail(), Trigger.TIMEOUT) from exc
    finally:
        writes.close(stopped_as, why)
        if stopped_as is not None and (port := urlsplit(servers.case.base_url).port) is not None:
            shut_own_connections(port)  # the abandoned work's requests: the server's SIGTERM would wait on them
        results.timings.phases[phase] = round(ctx.clock() - started, 3)
        ctx.store.flush()


def _startup_stall_reported(
    ctx: RunContext, case: CasePlan, results: CaseResults, servers: CaseServers, stall: Stall
) -> None:
    """``engine.on_startup_stall: wait``: say which role waits where, and keep waiting until budgets.startup_s."""
    ctx.progress(f"{stall.message}; waiting on until budgets.startup_s (engine.on_startup_stall: wait)")
    _take_forensics(ctx, case, results, servers, Trigger.STARTUP, stall.message)


def _print_attach(ctx: RunContext, servers: CaseServers) -> None:
    """``--keep-on-stall``: every process left up, and how to look inside one."""
    from afd_e2e.system.process_state import case_processes

    ctx.progress("--keep-on-stall: the stalled case's processes are left up:")
    for state in case_processes((s.name, s.pid) for s in servers.servers):
        ctx.progress(f"  {state.describe()}: attach with `py-spy dump --pid {state.pid}` or `gdb -p {state.pid}`")
    ctx.progress(f"end them with `afd-e2e cleanup --out {ctx.layout.out_dir}`")


def _kept(ctx: RunContext, results: CaseResults, servers: CaseServers) -> None:
    ctx.progress.enter(results.id, "kept")
    ctx.progress("not torn down (--keep-on-stall): no hygiene checks")


def _summarize_telemetry(ctx: RunContext, case: CasePlan, results: CaseResults, servers: CaseServers) -> None:
    sampler = servers.sampler
    if sampler is None:
        return
    found = [w for w in (sampler.watchdog.startup_found, sampler.watchdog.found) if w is not None]
    path = sampler.settings.path
    results.set_section(
        "telemetry",
        summarize(
            case,
            sampler.samples,
            path=ctx.layout.relative(path) if path is not None else None,
            interval_s=sampler.settings.interval_s,
            stall_s=sampler.settings.stall_s,
            sampler_cpu_s=sampler.cpu_s,
            stalls=[stall_record(w, kept=servers.kept and w.kind == "stall") for w in found],
        ),
    )


def _judge_execution(ctx: RunContext, case: CasePlan, results: CaseResults) -> None:
    """Each role's execution mode against its own evidence, once its logs and traces are complete (after the
    teardown). A contradicted role (or an unproven one where the profile requires proof) fails a case that passed
    otherwise, with the evidence; an unproven one is a warning. A case that never got ready has nothing to judge."""
    if results.timings.launch_to_ready_s is None or results.status is Status.CANCELLED:
        return
    logs = {p.name: p.log for p in results.processes if p.log}
    section = judge_case(case, ctx.plan.platform, ctx.layout.out_dir, logs, ctx.profile.require_proof)
    results.set_section("execution", section)
    ctx.progress(f"execution: {section.proof}" + (f": {section.failure}" if section.failure else ""))
    if section.status is Status.FAILED and results.status is Status.PASSED:
        results.status, results.failure = Status.FAILED, f"execution: {section.failure}"
    ctx.store.flush()


def _phase_context(
    ctx: RunContext,
    case: CasePlan,
    writes: PhaseWrites,
    stop: threading.Event,
    take_forensics: Callable[[Trigger, str], None],
    servers: CaseServers,
) -> PhaseContext:
    return PhaseContext(
        profile=ctx.profile,
        case=case,
        case_results=writes.sections,
        out_dir=ctx.layout.out_dir,
        progress=ctx.progress,
        cancelled=stop,
        flush=writes.flush,
        gsm8k_dir=ctx.gsm8k_dir,
        client_env=lambda name: client_environment(ctx.base_env, markers=marker_env(ctx.run_id, case.id, name)),
        take_forensics=lambda trigger, reason: take_forensics(Trigger(trigger), reason),
        diagnose=servers.diagnose,
        timeline=servers.timeline,
        bench_client=servers.bench_client,
    )


def _stop_and_check(
    ctx: RunContext,
    case: CasePlan,
    results: CaseResults,
    servers: CaseServers,
    gpu_before: GpuSnapshot,
) -> None:
    ctx.progress.enter(case.id, "teardown")
    grace_s = min(case.teardown_grace_s, CANCEL_GRACE_S) if ctx.flag.is_set() else case.teardown_grace_s
    outcome = servers.stop(grace_s, cancel=ctx.flag)
    for server, entry in zip(servers.servers, results.processes, strict=True):
        entry.exit_code = server.reap()
        entry.forced_kill = server.name in outcome.forced
    results.timings.teardown_s = round(outcome.seconds, 3)
    ctx.store.flush()
    if servers.servers:
        ctx.progress(f"stopped in {outcome.seconds:.2f} s; exit codes {[e.exit_code for e in results.processes]}")

    ctx.progress.enter(case.id, "hygiene")
    if case.processes:
        launched = [
            check_forced_kill(outcome, grace_s, cancelled=ctx.flag.is_set()),
            check_ports(case.ports, servers.host),
            check_gpu_memory(gpu_before),
        ]
    else:  # a leader whose case runs wholly in follower jobs: their records hold these checks
        launched = [record(check, Status.SKIPPED, NOTHING_HERE) for check in ("forced_kill", "ports", "gpu_memory")]
    checks: list[CheckRecord] = [check_processes(servers.find), *launched, servers.remove_leftovers()]
    results.hygiene = checks
    ctx.progress("hygiene: " + ", ".join(f"{c.check} {c.status}" for c in checks))
    failed = [c for c in checks if c.status is Status.FAILED]
    if failed and results.status is Status.PASSED:
        results.status = Status.FAILED
        results.failure = "hygiene: " + "; ".join(f"{c.check}: {c.detail}" for c in failed)
        forced = [s for s in servers.servers if s.name in outcome.forced]
        results.log_tail = log_tail(forced[0].log_path) if forced else results.log_tail
