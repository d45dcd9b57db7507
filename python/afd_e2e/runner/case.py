"""One case, start to finish: launch its processes, wait for readiness, run its phases, stop it, check hygiene.

Whatever happens in between (a server dying, a failed phase, a cancel, a bug in the harness) the case is torn down,
checked and recorded; nothing escapes as an exception.
"""

from __future__ import annotations

import shlex
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

from afd_e2e.plan.model import CasePlan, RunPlan
from afd_e2e.profile import Profile
from afd_e2e.results.model import CaseResults, ProcessRecord
from afd_e2e.results.redaction import redact_argv, redact_env
from afd_e2e.results.status import Status
from afd_e2e.results.store import ResultsStore
from afd_e2e.runner.cancellation import CancelFlag, Cancelled, call_cancellable
from afd_e2e.runner.child_env import child_environment
from afd_e2e.runner.hygiene import (
    GpuSnapshot,
    check_forced_kill,
    check_gpu_memory,
    check_ports,
    check_processes,
    read_gpu_memory,
    remove_leftover_files,
    shm_entries,
)
from afd_e2e.runner.layout import RunLayout
from afd_e2e.runner.markers import find_marked, marker_env
from afd_e2e.runner.processes import ServerProcess, launch, log_tail
from afd_e2e.runner.progress import Progress
from afd_e2e.runner.readiness import ServerExited, StartupTimeout, wait_until_ready
from afd_e2e.runner.record import RunRecord
from afd_e2e.runner.smoke import smoke_completion
from afd_e2e.runner.teardown import terminate
from afd_e2e.system.ports import busy_ports
from afd_e2e.workloads import phases
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome

CANCEL_GRACE_S = 5.0  # Buildkite SIGKILLs a cancelled job 10 s after SIGTERM: leave time to write the results


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


def new_case_results(case: CasePlan, status: Status = Status.RUNNING, failure: str | None = None) -> CaseResults:
    return CaseResults(id=case.id, label=case.label, kind=case.kind, status=status, failure=failure)


def _fail(results: CaseResults, status: Status, failure: str, log_tail: str | None = None) -> None:
    results.status, results.failure = status, failure
    if log_tail is not None:
        results.log_tail = log_tail


def run_case(ctx: RunContext, case: CasePlan) -> CaseResults:
    """Run one case; its results section is written as it goes and returned."""
    started = time.monotonic()
    results = ctx.store.results.cases[case.id] = new_case_results(case)
    ctx.store.flush()
    servers: list[ServerProcess] = []
    gpu_before = read_gpu_memory(case.devices)
    shm_before = shm_entries()
    try:
        _launch(ctx, case, results, servers)
        _run_phases(ctx, case, results, servers)
    except CaseFailure as exc:
        _fail(results, Status.FAILED, str(exc), exc.log_tail)
    except Cancelled as exc:
        _fail(results, Status.CANCELLED, str(exc) or "cancelled")
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        _fail(results, Status.CRASHED, f"harness error: {type(exc).__name__}: {exc}")
    try:
        _stop_and_check(ctx, case, results, servers, gpu_before, shm_before)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        _fail(results, Status.CRASHED, f"harness error while stopping: {type(exc).__name__}: {exc}")
    results.timings.wall_s = round(time.monotonic() - started, 3)
    ctx.store.flush()
    ctx.progress(f"case {results.status}" + (f": {results.failure}" if results.failure else ""))
    return results


def _launch(ctx: RunContext, case: CasePlan, results: CaseResults, servers: list[ServerProcess]) -> None:
    logs = [ctx.layout.log_path(case.id, p.name) for p in case.processes]
    ctx.progress.enter(case.id, "startup", logs)
    busy = busy_ports(case.ports, urlsplit(case.base_url).hostname or "127.0.0.1")
    if busy:
        held = ", ".join(f"{port} held by {who}" for port, who in busy.items())
        raise CaseFailure(f"ports in use before start: {held}")
    scratch = ctx.layout.case_scratch(case.id)
    scratch.mkdir(parents=True, exist_ok=True)
    for process, log in zip(case.processes, logs, strict=True):
        ctx.flag.check()
        argv = (ctx.executables[process.argv[0]], *process.argv[1:])
        env = child_environment(
            ctx.base_env,
            process,
            scratch=scratch,
            cache=ctx.layout.cache_dir,
            markers=marker_env(ctx.run_id, case.id, process.name),
        )
        try:
            server = launch(process.name, argv, env, log)
        except OSError as exc:
            raise CaseFailure(f"cannot start {process.name}: {exc}") from exc
        servers.append(server)
        ctx.record.add_process(case.id, process.name, server.pid)
        results.processes.append(
            ProcessRecord(
                name=process.name,
                pid=server.pid,
                argv=redact_argv(argv),
                env=redact_env(env),
                log=ctx.layout.relative(log),
            )
        )
        ctx.store.flush()
        ctx.progress(f"launched {process.name} (pid {server.pid}): {shlex.join(argv)}")
    try:
        ready_s = wait_until_ready(case.ready_url, servers, case.startup_timeout_s, ctx.flag)
    except ServerExited as exc:
        raise CaseFailure(str(exc), log_tail(exc.server.log_path)) from exc
    except StartupTimeout as exc:
        raise CaseFailure(str(exc), log_tail(_api_server(case, servers).log_path)) from exc
    results.timings.launch_to_ready_s = round(ready_s, 3)
    ctx.store.flush()
    ctx.progress(f"ready after {ready_s:.1f} s at {case.base_url}")


def _api_server(case: CasePlan, servers: list[ServerProcess]) -> ServerProcess:
    name = next(p.name for p in case.processes if p.serves_api)
    return next(s for s in servers if s.name == name)


def _run_phases(ctx: RunContext, case: CasePlan, results: CaseResults, servers: list[ServerProcess]) -> None:
    """Smoke first (nothing else makes sense if it fails); a failed workload phase does not stop the next one."""
    runners: dict[str, Callable[[], PhaseOutcome]] = {
        "smoke": partial(_smoke, ctx, case, results),
        "correctness": partial(_workload, ctx, case, results, "run_correctness"),
        "performance": partial(_workload, ctx, case, results, "run_performance"),
    }
    api_log = _api_server(case, servers).log_path
    failures = []
    for phase in case.phases:
        ctx.flag.check()
        ctx.progress.enter(case.id, phase, [s.log_path for s in servers])
        phase_started = time.monotonic()
        try:
            outcome = call_cancellable(runners[phase], ctx.flag)
        finally:
            results.timings.phases[phase] = round(time.monotonic() - phase_started, 3)
            ctx.store.flush()
        if outcome.status.is_failure:
            failure = f"{phase}: {outcome.failure or outcome.status}"
            if phase == "smoke":
                raise CaseFailure(failure, log_tail(api_log))
            failures.append(failure)
    if failures:
        raise CaseFailure("; ".join(failures), log_tail(api_log))
    results.status = Status.PASSED


def _smoke(ctx: RunContext, case: CasePlan, results: CaseResults) -> PhaseOutcome:
    spec = ctx.profile.smoke
    smoke = results.smoke = smoke_completion(case.base_url, case.served_model_name, spec.prompt, spec.max_tokens)
    if smoke.status is Status.PASSED:
        ctx.progress(f"smoke: {smoke.completion!r} ({smoke.completion_tokens} tokens in {smoke.latency_s} s)")
    return PhaseOutcome(smoke.status, smoke.failure)


def _workload(ctx: RunContext, case: CasePlan, results: CaseResults, entry: str) -> PhaseOutcome:
    phase_ctx = PhaseContext(
        profile=ctx.profile,
        case=case,
        case_results=results,
        out_dir=ctx.layout.out_dir,
        progress=ctx.progress,
        cancelled=ctx.flag,
        flush=ctx.store.flush,
        gsm8k_dir=ctx.gsm8k_dir,
    )
    return getattr(phases, entry)(phase_ctx)


def _stop_and_check(
    ctx: RunContext,
    case: CasePlan,
    results: CaseResults,
    servers: list[ServerProcess],
    gpu_before: GpuSnapshot,
    shm_before: set[str],
) -> None:
    find = partial(find_marked, ctx.run_id, case.id)
    ctx.progress.enter(case.id, "teardown")
    grace_s = min(case.teardown_grace_s, CANCEL_GRACE_S) if ctx.flag.is_set() else case.teardown_grace_s
    outcome = terminate(find, grace_s)
    for server, entry in zip(servers, results.processes, strict=True):
        entry.exit_code = server.reap()
        entry.forced_kill = server.name in outcome.forced
    results.timings.teardown_s = round(outcome.seconds, 3)
    ctx.store.flush()
    if servers:
        ctx.progress(f"stopped in {outcome.seconds:.2f} s; exit codes {[e.exit_code for e in results.processes]}")

    ctx.progress.enter(case.id, "hygiene")
    checks = [
        check_processes(find),
        check_forced_kill(outcome, grace_s),
        check_ports(case.ports, urlsplit(case.base_url).hostname or "127.0.0.1"),
        check_gpu_memory(gpu_before),
        remove_leftover_files(ctx.layout.case_scratch(case.id), shm_before),
    ]
    results.hygiene = checks
    ctx.progress("hygiene: " + ", ".join(f"{c.check} {c.status}" for c in checks))
    failed = [c for c in checks if c.status is Status.FAILED]
    if failed and results.status is Status.PASSED:
        results.status = Status.FAILED
        results.failure = "hygiene: " + "; ".join(f"{c.check}: {c.detail}" for c in failed)
        forced = [s for s in servers if s.name in outcome.forced]
        results.log_tail = log_tail(forced[0].log_path) if forced else results.log_tail
