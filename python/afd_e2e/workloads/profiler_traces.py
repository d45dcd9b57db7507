"""Profiler traces: each role's torch profiler must write a non-empty trace; what is uploaded is capped.

The case's roles write into ``traces/<case>/<role>/`` of the results folder (``plan.serve_argv``): an AFD role's
through the plugin's per-role profiler, a native server's through vLLM's own, which the phase starts and stops
(``/start_profile``, ``/stop_profile``: the stop writes the trace). The phase sends
a few requests, each long enough for the whole schedule (``request_tokens``), so the profiler's schedule completes, then waits for every role's trace (the tensorboard trace
handler writes a file when the active steps end) until its size holds still. Uploads take the newest traces first
while they fit the profile's size limit; the rest stay on the agent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from afd_e2e.profile import ProfilerSpec
from afd_e2e.results.model import ProfilerResult, RoleTrace, TraceFile
from afd_e2e.results.status import Status
from afd_e2e.workloads.completions import CompletionError, complete, post

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
