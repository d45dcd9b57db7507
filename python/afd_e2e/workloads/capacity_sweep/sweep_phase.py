"""The ``capacity`` phase on a ready case, and the ``capacity`` measure of a comparison.

The case's sweep runs on its one launch (no model load per level). Compared cases share their levels: a case first
measures the levels that the cases it is compared with were already measured at (read from the run's results as
flushed so far), so their curves overlay; then its own search goes on over the shared grid.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from afd_e2e.errors import UsageError
from afd_e2e.plan.model import ComparisonPlan
from afd_e2e.profile.bench_spec import bench_spec
from afd_e2e.profile.capacity_spec import CapacitySpec
from afd_e2e.profile.model import Profile
from afd_e2e.results import load_results
from afd_e2e.results.capacity_records import CapacityComparison, CapacitySlo, CaseCapacity
from afd_e2e.results.codec import FormatError
from afd_e2e.results.model import CaseResults
from afd_e2e.results.status import Status
from afd_e2e.system.executables import resolve_executable
from afd_e2e.workloads import bench
from afd_e2e.workloads.capacity_sweep.compare import compare_capacity
from afd_e2e.workloads.capacity_sweep.sweep import run_sweep
from afd_e2e.workloads.completions import CompletionError, served_model_root
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome

SECTION = "capacity"
BUDGET_KEY = "capacity_s"
PROGRESS_EVERY_S = 10.0
STOP_GRACE_S = 15.0  # stopping the running bench when the sweep's budget ends (SIGTERM, then SIGKILL)


def capacity_spec(profile: Profile) -> CapacitySpec:
    return profile.workloads[SECTION]


def phase_budget_s(profile: Profile, capacity_s: float) -> float:
    """The runner's bound on the phase: the sweep's own budget (it stops itself and reports the bracket it has),
    plus the model-card request and the time to stop a running bench."""
    return capacity_s + profile.budgets.request_s + STOP_GRACE_S


def shared_levels(ctx: PhaseContext) -> list[float]:
    """Levels the cases this one is compared with were measured at, earlier in this run."""
    partners = {
        other
        for cmp in ctx.profile.comparisons
        if SECTION in cmp.measures and ctx.case.id in (cmp.baseline, cmp.candidate)
        for other in (cmp.baseline, cmp.candidate)
        if other != ctx.case.id
    }
    if not partners:
        return []
    try:
        results = load_results(ctx.out_dir)
    except (UsageError, FormatError, OSError):
        return []
    levels: set[float] = set()
    for case_id in partners:
        case = results.case(case_id)
        section: CaseCapacity | None = case.section(SECTION) if case else None
        levels.update(lv.level for lv in (section.levels if section else []) if lv.attainment is not None)
    return sorted(levels)


def run_capacity(ctx: PhaseContext) -> PhaseOutcome:
    """The sweep, published level by level into the case's ``capacity`` section."""
    spec = capacity_spec(ctx.profile)
    base = bench_spec(ctx.profile)
    assert base is not None  # the profile reader refuses a capacity section without workloads.bench
    shape = base.shape(spec.shape)
    case = ctx.case
    publish = partial(ctx.record, SECTION)

    try:
        tokenizer = served_model_root(case.base_url, case.served_model_name, timeout_s=ctx.profile.budgets.request_s)
    except CompletionError as exc:
        slo = CapacitySlo(spec.slo.ttft_ms, spec.slo.tpot_ms, spec.slo.attainment)
        publish(CaseCapacity(Status.FAILED, spec.variable, spec.unit, slo, spec.search is not None, failure=str(exc)))
        return PhaseOutcome(Status.FAILED, str(exc))
    required = shared_levels(ctx)
    if required:
        ctx.progress(f"capacity: first the levels compared cases ran at: {', '.join(f'{lv:g}' for lv in required)}")
    section = run_sweep(
        spec,
        shape,
        executable=resolve_executable(ctx.profile.engine.executable),
        base_url=case.base_url,
        model=case.served_model_name,
        tokenizer=tokenizer,
        out_dir=ctx.out_dir,
        case_id=case.id,
        gpus=len(case.devices),
        required=required,
        budget_s=ctx.profile.budgets.seconds(BUDGET_KEY),
        publish=publish,
        progress=ctx.progress,
        cancelled=ctx.cancelled,
        heartbeat_s=PROGRESS_EVERY_S,
        env=bench.client_env(ctx.client_env(bench.PROCESS_NAME)),
        client=ctx.bench_client,
    )
    return PhaseOutcome(section.status, f"capacity: {section.failure}" if section.failure else None)


def compare_cases(
    profile: Profile,
    comparison: ComparisonPlan,
    baseline: CaseResults | None,
    candidate: CaseResults | None,
    out_dir: Path,
) -> CapacityComparison:
    spec = capacity_spec(profile)
    return compare_capacity(
        comparison.baseline,
        baseline.section(SECTION) if baseline else None,
        comparison.candidate,
        candidate.section(SECTION) if candidate else None,
        threshold_pct=spec.parity_threshold_pct,
        on_worse=spec.on_worse,
        control=comparison.control,
    )
