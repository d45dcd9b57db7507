"""One case, start to finish: launch its processes, wait for readiness, run its phases, stop it, check hygiene.

Whatever happens in between (a role dying, a phase over its budget, a failed phase, a cancel, a bug in the harness)
the case is torn down, checked and recorded; nothing escapes as an exception. Every role is watched from launch to
teardown (``watch.py``), so a death ends whatever phase runs within seconds, naming the role and its root cause.

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
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import ClassVar

from afd_e2e.phases import registry
from afd_e2e.plan.model import CasePlan, RunPlan
from afd_e2e.profile import Profile
from afd_e2e.results.model import CaseResults, CheckRecord, ProcessRecord
from afd_e2e.results.redaction import redact_argv, redact_env
from afd_e2e.results.status import Status
from afd_e2e.results.store import ResultsStore
from afd_e2e.runner.cancellation import CANCEL_GRACE_S, CancelFlag, Cancelled, call_watched
from afd_e2e.runner.hygiene import (
    GpuSnapshot,
    check_forced_kill,
    check_gpu_memory,
    check_ports,
    check_processes,
    read_gpu_memory,
)
from afd_e2e.runner.layout import RunLayout
from afd_e2e.runner.processes import ServerProcess, log_tail
from afd_e2e.runner.progress import Progress
from afd_e2e.runner.readiness import StartupTimeout
from afd_e2e.runner.record import RunRecord
from afd_e2e.runner.server import CaseServers, LaunchFailed
from afd_e2e.runner.watch import EngineDied
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome

DEATH_SETTLE_S = 1.0  # a phase that failed because its server just died: time for the watch to name the role


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


class CaseFailure(Exception):
    def __init__(self, message: str, log_tail: str | None = None) -> None:
        super().__init__(message)
        self.log_tail = log_tail


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
            for name in registry.written_sections():
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


def run_case(ctx: RunContext, case: CasePlan) -> CaseResults:
    """Run one case; its results section is written as it goes and returned."""
    started = time.monotonic()
    results = ctx.store.results.cases[case.id] = new_case_results(case)
    ctx.store.flush()
    gpu_before = read_gpu_memory(case.devices)
    with CaseServers(
        case,
        ctx.layout.log_dir(case.id),
        scratch=ctx.layout.case_scratch(case.id),
        cache=ctx.layout.cache_dir,
        run_id=ctx.run_id,
        base_env=ctx.base_env,
        executables=ctx.executables,
        on_launch=partial(_launched, ctx, case, results),
        out_dir=ctx.layout.out_dir,
    ) as servers:
        try:
            _start(ctx, case, results, servers)
            _run_phases(ctx, case, results, servers)
        except CaseFailure as exc:
            _fail(results, Status.FAILED, str(exc), exc.log_tail)
        except Cancelled as exc:
            _fail(results, Status.CANCELLED, str(exc) or "cancelled")
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            _fail(results, Status.CRASHED, f"harness error: {type(exc).__name__}: {exc}")
        try:
            _stop_and_check(ctx, case, results, servers, gpu_before)
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            _fail(results, Status.CRASHED, f"harness error while stopping: {type(exc).__name__}: {exc}")
    results.timings.wall_s = round(time.monotonic() - started, 3)
    ctx.store.flush()
    ctx.progress(f"case {results.status}" + (f": {results.failure}" if results.failure else ""))
    return results


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
        )
    )
    ctx.store.flush()
    ctx.progress(f"launched {server.name} (pid {server.pid}): {shlex.join(server.argv)}")


def _died(servers: CaseServers, exc: EngineDied, phase: str) -> CaseFailure:
    """The case's failure for a dead role: the role, the phase, the sign and the root cause, its log's tail."""
    return CaseFailure(exc.death.describe(phase), log_tail(servers.log_path(exc.death.role)))


def _start(ctx: RunContext, case: CasePlan, results: CaseResults, servers: CaseServers) -> None:
    ctx.progress.enter(case.id, "startup", [servers.log_path(p.name) for p in case.processes])
    try:
        servers.launch(ctx.flag)
        ready_s = servers.wait_ready(ctx.flag)
    except LaunchFailed as exc:
        raise CaseFailure(str(exc)) from exc
    except EngineDied as exc:
        raise _died(servers, exc, "start-up") from exc
    except StartupTimeout as exc:
        raise CaseFailure(str(exc), log_tail(servers.api_server().log_path)) from exc
    results.timings.launch_to_ready_s = round(ready_s, 3)
    ctx.store.flush()
    ctx.progress(f"ready after {ready_s:.1f} s at {case.base_url}")


def _run_phases(ctx: RunContext, case: CasePlan, results: CaseResults, servers: CaseServers) -> None:
    """Smoke first (nothing else makes sense if it fails); a failed workload phase does not stop the next one."""
    api_log = servers.api_server().log_path
    failures = []
    for phase in case.phases:
        ctx.flag.check()
        try:
            servers.check()
        except EngineDied as exc:
            raise _died(servers, exc, phase) from exc
        ctx.progress.enter(case.id, phase, [s.log_path for s in servers.servers])
        outcome = _run_phase(ctx, case, results, servers, phase)
        if outcome.status.is_failure:
            failure = f"{phase}: {outcome.failure or outcome.status}"
            if phase == "smoke":
                raise CaseFailure(failure, log_tail(api_log))
            failures.append(failure)
    try:
        servers.check()
    except EngineDied as exc:
        raise _died(servers, exc, case.phases[-1] if case.phases else "start-up") from exc
    if failures:
        raise CaseFailure("; ".join(failures), log_tail(api_log))
    results.status = Status.PASSED


def _run_phase(ctx: RunContext, case: CasePlan, results: CaseResults, servers: CaseServers, phase: str) -> PhaseOutcome:
    """One phase in a worker thread, watched: a cancel, a dead role or an overrun budget abandons it at once."""
    writes = PhaseWrites(results, ctx.store)
    stop = threading.Event()  # tells the phase's own work to end (set when the phase is abandoned)
    descriptor = registry.phase(phase)
    budget_key, budget_s = descriptor.budget.label, descriptor.budget.seconds(ctx.profile)
    started = time.monotonic()

    def within_budget() -> None:
        if time.monotonic() - started > budget_s:
            raise OverBudget(f"{phase} ran past its budget ({budget_key} = {budget_s:g} s)")

    work = partial(descriptor.run, _phase_context(ctx, case, writes, stop))
    stopped_as, why = None, ""
    try:
        outcome = call_watched(work, [ctx.flag.check, servers.check, within_budget], stop)
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
        raise _died(servers, exc, phase) from exc
    except OverBudget as exc:
        stopped_as, why = Status.FAILED, f"stopped: {exc}"
        raise CaseFailure(str(exc), log_tail(servers.api_server().log_path)) from exc
    finally:
        writes.close(stopped_as, why)
        results.timings.phases[phase] = round(time.monotonic() - started, 3)
        ctx.store.flush()


def _phase_context(ctx: RunContext, case: CasePlan, writes: PhaseWrites, stop: threading.Event) -> PhaseContext:
    return PhaseContext(
        profile=ctx.profile,
        case=case,
        case_results=writes.sections,
        out_dir=ctx.layout.out_dir,
        progress=ctx.progress,
        cancelled=stop,
        flush=writes.flush,
        gsm8k_dir=ctx.gsm8k_dir,
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
    checks: list[CheckRecord] = [
        check_processes(servers.find),
        check_forced_kill(outcome, grace_s, cancelled=ctx.flag.is_set()),
        check_ports(case.ports, servers.host),
        check_gpu_memory(gpu_before),
        servers.remove_leftovers(),
    ]
    results.hygiene = checks
    ctx.progress("hygiene: " + ", ".join(f"{c.check} {c.status}" for c in checks))
    failed = [c for c in checks if c.status is Status.FAILED]
    if failed and results.status is Status.PASSED:
        results.status = Status.FAILED
        results.failure = "hygiene: " + "; ".join(f"{c.check}: {c.detail}" for c in failed)
        forced = [s for s in servers.servers if s.name in outcome.forced]
        results.log_tail = log_tail(forced[0].log_path) if forced else results.log_tail
