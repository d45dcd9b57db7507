"""The ``profiler`` phase, defined in this one module: each role's torch profiler must write a non-empty trace; what
is uploaded is capped.

The case's roles write into ``traces/<case>/<role>/`` of the results folder (``plan.serve_argv``): an AFD role's
through the plugin's per-role profiler, a native server's through vLLM's own, which the phase starts and stops
(``/start_profile``, ``/stop_profile``: the stop writes the trace). The phase sends a few completions of the smoke's
prompt (``smoke_spec``), each long enough for the whole schedule (``request_tokens``), so the profiler's schedule
completes, then waits for every role's trace (the tensorboard trace handler writes a file when the active steps end)
until its size holds still. Uploads take the newest traces first while they fit the profile's size limit; the rest
stay on the agent.

Profile keys (docs/reference.md): the case option ``cases.<case>.profiler`` (its schedule, ``wait_s`` and
``upload_limit_mib``), which a case sets exactly where it lists the phase; it stays a case option of the profile
layer (``ProfilerSpec``) because the plan launches the roles with it; ``budgets.profiler_s`` (default 300). The
progress watchdog does not judge stalls while it runs: ``/stop_profile`` holds its request open, no token moving,
while the traces are written. The case's ``profiler`` section is ``results/profiler_records.py``'s; the reports show
it through ``report/profiler_report.py`` (a testcase per role, the annotation's Features table with the trace links,
and the traces chosen for upload).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from afd_e2e.phases.registry import Budget, Phase, ResultsSection
from afd_e2e.phases.smoke import smoke_spec
from afd_e2e.plan.serve_argv import trace_dir
from afd_e2e.profile import ProfilerSpec
from afd_e2e.results.profiler_records import SECTION, ProfilerResult, RoleTrace, TraceFile
from afd_e2e.results.status import Status
from afd_e2e.workloads.completions import CompletionError, complete, post
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome

NAME = "profiler"

POLL_S = 1.0
REQUESTS = 3  # as the plugin's own profiler test: the schedule's steps several times over
TOKENS = 8  # at least: one prefill step and seven decode steps


def request_tokens(spec: ProfilerSpec) -> int:
    """Tokens per request: one request alone spans the whole schedule (skipped, waiting, warm-up and active steps)
    twice over in decode steps, so the active window falls on decode steps, which are what prove graph replay,
    whichever step the profiler counts first."""
    return max(TOKENS, 2 * (spec.skip_first + spec.wait + spec.warmup + spec.active))


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []


def _settled(
    folder: Path,
    cancelled: threading.Event,
    deadline: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> list[Path]:
    """Non-empty files whose sizes held still for one poll; empty when none appeared before the deadline."""
    previous: dict[Path, int] = {}
    while True:
        current = {p: p.stat().st_size for p in _files(folder)}
        ready = [p for p, size in current.items() if size > 0 and previous.get(p) == size]
        if ready and len(ready) == len([s for s in current.values() if s > 0]):
            return ready
        if clock() >= deadline or cancelled.is_set():
            return ready
        previous = current
        sleep(POLL_S)


def choose_uploads(traces: list[TraceFile], mtimes: dict[str, float], limit_mib: float) -> None:
    """Mark the newest traces uploaded while their total stays within ``limit_mib``."""
    budget = limit_mib * 1024 * 1024
    for trace in sorted(traces, key=lambda t: mtimes[t.path], reverse=True):
        if trace.size_bytes <= budget:
            trace.uploaded = True
            budget -= trace.size_bytes


def check_traces(
    spec: ProfilerSpec,
    *,
    out_dir: Path,
    role_dirs: dict[str, str],
    base_url: str,
    model: str,
    prompt: str,
    progress: Callable[[str], None],
    cancelled: threading.Event,
    request_timeout_s: float,
    started_by_request: bool = False,
) -> ProfilerResult:
    """Drive the profiler's schedule, then judge each role's folder (``role_dirs``: role -> relative folder);
    ``started_by_request``: the server's profiler runs between ``/start_profile`` and ``/stop_profile``."""
    try:
        if started_by_request:
            post(f"{base_url}/start_profile", timeout_s=request_timeout_s)
        for number in range(1, REQUESTS + 1):
            try:
                complete(base_url, model, prompt, max_tokens=request_tokens(spec), timeout_s=request_timeout_s)
            except CompletionError as exc:
                return ProfilerResult(Status.FAILED, f"request {number} failed: {exc}", spec.upload_limit_mib)
        if started_by_request:
            post(f"{base_url}/stop_profile", timeout_s=request_timeout_s)
    except CompletionError as exc:
        return ProfilerResult(Status.FAILED, f"profiler control failed: {exc}", spec.upload_limit_mib)
    return judge_traces(spec, out_dir=out_dir, role_dirs=role_dirs, progress=progress, cancelled=cancelled)


def judge_traces(
    spec: ProfilerSpec,
    *,
    out_dir: Path,
    role_dirs: dict[str, str],
    progress: Callable[[str], None],
    cancelled: threading.Event,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> ProfilerResult:
    """Each role passes with at least one settled, non-empty trace file; the uploads are chosen across roles. The
    wait for traces (``wait_s``) is read on ``clock`` and polls with ``sleep`` (tests drive both)."""
    result = ProfilerResult(status=Status.RUNNING, failure=None, upload_limit_mib=spec.upload_limit_mib)
    deadline = clock() + spec.wait_s
    mtimes: dict[str, float] = {}
    for role, relative in role_dirs.items():
        files = _settled(out_dir / relative, cancelled, deadline, clock, sleep)
        if files:
            size = sum(p.stat().st_size for p in files)
            result.roles.append(
                RoleTrace(role, Status.PASSED, f"{len(files)} trace file(s), {size} bytes in {relative}")
            )
        else:
            found = ", ".join(str(p.relative_to(out_dir)) for p in _files(out_dir / relative)) or "nothing"
            detail = f"no non-empty trace from the {role} role in {relative} within {spec.wait_s:.0f} s (found {found})"
            result.roles.append(RoleTrace(role, Status.FAILED, detail))
        for path in files:
            rel = str(path.relative_to(out_dir))
            mtimes[rel] = path.stat().st_mtime
            result.traces.append(TraceFile(role, rel, path.stat().st_size))
        progress(f"profiler: {role}: {result.roles[-1].detail}")
    choose_uploads(result.traces, mtimes, spec.upload_limit_mib)
    failed = [r for r in result.roles if r.status is Status.FAILED]
    result.status = Status.CANCELLED if cancelled.is_set() else Status.FAILED if failed else Status.PASSED
    result.failure = "cancelled" if cancelled.is_set() else "; ".join(r.detail for r in failed) or None
    return result


def run_profiler(ctx: PhaseContext) -> PhaseOutcome:
    """Every role's profiler trace under ``traces/<case>/<role>/``, and which of them are uploaded."""
    case = ctx.case
    spec = ctx.profile.case(case.id).profiler
    if case.kind == "native":  # vLLM's own profiler, folder named in argv (plan.serve_argv.native_profiler_args)
        role_dirs = {p.name: trace_dir(case.id, p.name) for p in case.processes}
    else:  # the AFD plugin's per-role profiler, folder named in the environment
        role_dirs = {p.role: folder for p in case.processes for folder in p.out_dir_env.values()}
    section = check_traces(
        spec,
        out_dir=ctx.out_dir,
        role_dirs=role_dirs,
        base_url=case.base_url,
        model=case.served_model_name,
        prompt=smoke_spec(ctx.profile).prompt,
        progress=ctx.progress,
        cancelled=ctx.cancelled,
        request_timeout_s=ctx.profile.budgets.request_s,
        started_by_request=case.kind == "native",
    )
    ctx.record(SECTION, section)
    return PhaseOutcome(section.status, section.failure)


PROFILER = Phase(
    name=NAME,
    doc="every AFD role's torch profiler trace, and which of them are uploaded",
    budget=Budget("profiler_s", 300.0),
    run=run_profiler,
    stall_watched=False,  # stop_profile holds its request open while the traces are written
    # ``| None``: results written while the profiler was a field of every case hold ``"profiler": null``
    sections=(ResultsSection(SECTION, ProfilerResult | None),),
)
