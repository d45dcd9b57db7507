"""A whole run: check the plan can start, run its cases in order, compare them, decide the verdict, render reports.

``DIR/results.json`` is written from the first moment and after every step, so a crash, a cancel or a kill leaves a
valid file with what was measured. The run is cancelled by SIGTERM/SIGINT and then still writes its results.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

from afd_e2e.buildkite.env import describe_build
from afd_e2e.execution.runners import match_model_runners
from afd_e2e.plan.model import RunPlan
from afd_e2e.profile import Profile
from afd_e2e.report.render import render_all
from afd_e2e.results.model import PreflightRecord, RunResults
from afd_e2e.results.store import ResultsStore, now_iso
from afd_e2e.runner.admission import Admission, admit_plan
from afd_e2e.runner.cancellation import CancelFlag, cancel_on_signals
from afd_e2e.runner.case import AgentSide, RunContext
from afd_e2e.runner.environment import describe_environment
from afd_e2e.runner.hygiene import read_gpu_memory, shm_entries
from afd_e2e.runner.layout import RunLayout
from afd_e2e.runner.run_record import RunRecord
from afd_e2e.runner.series_servers import kept_up, run_cases
from afd_e2e.runner.verdict import decide_verdict
from afd_e2e.system.markers import new_run_id
from afd_e2e.system.progress import Progress
from afd_e2e.workloads.comparisons import run_comparisons


def _close(store: ResultsStore, *, cancelled: str | None = None, crashed: str | None = None) -> None:
    """The verdict, written: the end of every run, however it ended."""
    results = store.results
    results.verdict = decide_verdict(results, cancelled=cancelled, crashed=crashed)
    results.status, results.finished_at = results.verdict.status, now_iso()
    store.flush()


def _report(store: ResultsStore, progress: Progress) -> None:
    """The verdict shown and the reports rendered (a renderer failure is reported, never raised)."""
    verdict = store.results.verdict
    progress.enter("", "")
    progress(f"verdict: {verdict.status}")
    for reason in verdict.reasons:
        progress(f"  - {reason}")
    try:
        render_all(store.out_dir)
        progress(f"reports rendered in {store.out_dir}")
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        progress(f"reports not rendered: the renderer failed: {type(exc).__name__}: {exc}")


def execute_run(
    profile: Profile,
    plan: RunPlan | Admission,
    out_dir: Path,
    *,
    gsm8k_dir: Path | None = None,
    progress: Progress | None = None,
    flag: CancelFlag | None = None,
    preflight: Callable[[], PreflightRecord] | None = None,
    allow_busy_gpus: bool = False,
    keep_on_stall: bool = False,
    side: AgentSide | None = None,
    env: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] | None = None,
) -> RunResults:
    """Run an admitted plan into ``out_dir``; return the results (also in ``out_dir/results.json``).

    A bare plan is admitted here first (``admit_plan``: phase inputs, ``preflight``, ports, executables, idle GPUs; a
    refusal is a UsageError and nothing is written). The preflight (``afd-e2e run`` passes the same checks as
    ``afd-e2e preflight``) is recorded; when the agent does not fit, the run stops there, before anything is launched,
    with the failed checks as its verdict. Busy GPUs allowed (``allow_busy_gpus``) are listed in the results.
    With ``keep_on_stall`` a stalled case's processes are left up and the run ends after that case. ``side`` is
    this agent's part in the cases placed on several agents (the leader's, or a follower's). ``env``: the
    environment the case processes start from (default the agent's; ``afd-e2e bisect`` prepends a commit's package).
    ``clock`` and ``sleep``: what the cases' budgets, telemetry, timings and the engine watch are read on, and how
    the telemetry, the watch and abandoned work wait (``RunContext``; tests drive both).
    """
    admission = (
        plan
        if isinstance(plan, Admission)
        else admit_plan(
            profile,
            plan,
            gsm8k_dir=gsm8k_dir,
            allow_busy_gpus=allow_busy_gpus,
            preflight=preflight,
            hosted=side.hosted if side is not None else None,
        )
    )
    if not admission.admitted or admission.plan is None:
        raise admission.error()
    plan, executables, busy = admission.plan, admission.executables, admission.busy
    progress = progress or Progress()
    run_id = new_run_id()
    layout = RunLayout.for_run(out_dir, run_id)
    start = {"run_id": run_id, "build": describe_build(os.environ), "preflight": admission.preflight}
    if admission.misfit:
        layout.out_dir.mkdir(parents=True, exist_ok=True)
        store = ResultsStore.start(layout.out_dir, plan, environment=describe_environment(plan), **start)
        with progress:
            progress(f"run {run_id}: the agent does not fit profile {profile.name}: nothing launched")
            _close(store)
            _report(store, progress)
        return store.results
    layout.out_dir.mkdir(parents=True, exist_ok=True)
    store = ResultsStore.start(
        layout.out_dir,
        plan,
        environment=describe_environment(plan),
        busy_gpus=[f"{check.name}: {check.measured}" for check in busy],
        **start,
    )
    results = store.results
    hosted = side.hosted if side is not None else None
    record = RunRecord.start(layout, run_id, plan, read_gpu_memory(plan.devices), shm_entries(), hosted)
    flag = flag or CancelFlag()
    crashed = None
    with cancel_on_signals(flag), progress:
        progress(f"run {run_id}: profile {profile.name}, {len(plan.cases)} cases, results in {layout.out_dir}")
        ctx = RunContext(
            profile,
            plan,
            run_id,
            layout,
            store,
            record,
            progress,
            flag,
            executables,
            dict(os.environ if env is None else env),
            gsm8k_dir,
            keep_on_stall=keep_on_stall,
            side=side,
            clock=clock,
            sleep=sleep,
        )
        try:
            run_cases(ctx, plan.cases)
            if not flag.is_set():
                results.comparisons = run_comparisons(profile, results, layout.out_dir)
                match_model_runners(results)
                store.flush()
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            crashed = f"{type(exc).__name__}: {exc}"
        finally:
            if not any(map(kept_up, results.cases.values())):  # a kept case's processes use their scratch folder
                shutil.rmtree(layout.scratch_root, ignore_errors=True)
            _close(store, cancelled=(flag.reason or "cancelled") if flag.is_set() else None, crashed=crashed)
            if side is not None:
                side.run_over(results.status)
        _report(store, progress)
    return results
