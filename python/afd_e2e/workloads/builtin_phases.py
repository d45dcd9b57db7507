"""The built-in phases' run and compare functions (registered in ``afd_e2e.phases.builtin``), and the comparison
of finished cases.

``ctx`` is a ``afd_e2e.workloads.context.PhaseContext``: profile, case (CasePlan), case_results (this case's
``CaseResults``), out_dir, progress (one-line callback), cancelled (threading.Event), flush (persist results.json),
and gsm8k_dir (the runner's default staged GSM8K folder, or None). Every phase writes its sections into
``case_results`` and flushes as results arrive, so a cancel or crash keeps what was measured, and returns the
runner's ``PhaseOutcome``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from pathlib import Path

from afd_e2e.plan.model import ComparisonPlan
from afd_e2e.profile import BenchSpec, Profile, catalogue
from afd_e2e.results import result_sections
from afd_e2e.results.model import (
    CasePerformance,
    CaseResults,
    Comparison,
    PerformanceComparison,
    RunResults,
)
from afd_e2e.results.status import Status
from afd_e2e.system.executables import resolve_executable
from afd_e2e.workloads import bench, performance
from afd_e2e.workloads.comparisons import COMPARES
from afd_e2e.workloads.completions import CompletionError, served_model_root
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome, worst_outcome

PROGRESS_EVERY_S = 10.0


def check_performance_inputs(profile: Profile, gsm8k_dir: Path | None) -> None:
    """A ``vllm`` executable for the bench."""
    if profile.bench is not None:
        resolve_executable(profile.engine.executable)


def run_performance(ctx: PhaseContext) -> PhaseOutcome:
    """One warmup and N formal ``vllm bench serve`` repetitions, tokenizer = the checkpoint the server loaded; then
    each named load shape's own series (``workloads.bench.shapes``) in the same warm client, into the section's
    ``shapes``. A shape that fails fails the phase naming it; a cancel or a timed-out repetition (a hung server)
    ends the phase before the next shape."""
    spec = ctx.profile.bench
    case = ctx.case
    publish = partial(ctx.record, "performance")
    executable = resolve_executable(ctx.profile.engine.executable)
    try:
        tokenizer = served_model_root(case.base_url, case.served_model_name, timeout_s=ctx.profile.budgets.request_s)
    except CompletionError as exc:
        section = CasePerformance(Status.FAILED, str(exc))
        publish(section)
    else:
        target = bench.Target(
            case.id, case.base_url, case.served_model_name, tokenizer, bench.client_env(ctx.client_env("bench"))
        )
        timed_out: list[str] = []

        def on_timeout(reason: str) -> None:
            timed_out.append(reason)
            ctx.take_forensics("timeout", reason)

        with bench.case_client(executable, target, ctx.out_dir) as client:

            def series(spec: BenchSpec, shape: str, publish: Callable[[CasePerformance], None]) -> CasePerformance:
                return bench.run_bench_series(
                    spec,
                    target,
                    executable=executable,
                    out_dir=ctx.out_dir,
                    publish=publish,
                    progress=ctx.progress,
                    cancelled=ctx.cancelled,
                    heartbeat_s=PROGRESS_EVERY_S,
                    on_timeout=on_timeout,
                    diagnose=ctx.diagnose,
                    client=client,
                    shape=shape,
                )

            section = series(spec, "", publish)
            outcomes = [PhaseOutcome(section.status, section.failure)]
            for name, shape_spec in spec.shapes:
                if ctx.cancelled.is_set() or timed_out:  # a hung server would time out the next shape too
                    break
                shaped = series(
                    shape_spec, name, lambda shaped, name=name: _publish_shape(publish, section, name, shaped)
                )
                outcomes.append(PhaseOutcome(shaped.status, shaped.failure and f"shape {name}: {shaped.failure}"))
            return worst_outcome(outcomes)
    return worst_outcome([PhaseOutcome(section.status, section.failure)])


def _publish_shape(
    publish: Callable[[CasePerformance], None], section: CasePerformance, name: str, shaped: CasePerformance
) -> None:
    """A shape's series as it runs, in its case's section."""
    section.shapes[name] = shaped
    publish(section)


def run_comparisons(profile: Profile, results: RunResults, out_dir: Path) -> dict[str, Comparison]:
    """The ``comparisons`` section, from the plan's comparisons (controls included, marked) and the cases' results
    (and the side files they wrote in ``out_dir``): each registered measure the comparison names, by its phase's
    compare function."""
    labels = {c.id: c.label for c in results.plan.cases}
    comparisons: dict[str, Comparison] = {}
    for cmp in results.plan.comparisons:
        base, cand = results.case(cmp.baseline), results.case(cmp.candidate)
        entry = Comparison(cmp.baseline, cmp.candidate, *_told_apart(labels, cmp.baseline, cmp.candidate))
        for measure, section in result_sections.measure_sections().items():
            if measure in cmp.measures and catalogue.MEASURES[measure].needs(profile) is None:
                entry.set_section(section, COMPARES[measure](profile, cmp, base, cand, out_dir))
        comparisons[cmp.id] = entry
    return comparisons


def _told_apart(labels: dict[str, str], baseline: str, candidate: str) -> tuple[str, str]:
    """The two cases' labels, each followed by its id where they read the same (a case and its twin on another
    agent, a variant that changes no label): a report's "vs" and its column headers must tell them apart."""
    if labels[baseline] != labels[candidate]:
        return labels[baseline], labels[candidate]
    return f"{labels[baseline]} ({baseline})", f"{labels[candidate]} ({candidate})"


def compare_performance(
    profile: Profile, cmp: ComparisonPlan, base: CaseResults | None, cand: CaseResults | None, out_dir: Path
) -> PerformanceComparison:
    assert profile.bench is not None
    sides = [case.section("execution") if case else None for case in (base, cand)]
    if problem := performance.mode_problem(cmp.id, cmp.baseline, sides[0], cmp.candidate, sides[1]):
        return PerformanceComparison(Status.FAILED, problem, control=cmp.control)  # before any number is judged
    sections = [case.performance if case else None for case in (base, cand)]

    def judged(spec: BenchSpec, sides: list[CasePerformance | None]) -> PerformanceComparison:
        return performance.compare_case_performance(
            cmp.baseline,
            sides[0],
            cmp.candidate,
            sides[1],
            threshold_pct=spec.parity_threshold_pct,
            control=cmp.control,
            metrics=spec.metrics,
            gated_throughput=spec.gated_throughput,
        )

    result = judged(profile.bench, sections)
    for name, spec in profile.bench.shapes:
        sides = [
            dataclasses.replace(side.shapes[name], gpus=side.gpus) if side and name in side.shapes else None
            for side in sections
        ]
        result.shapes[name] = judged(spec, sides)
    return performance.fold_shapes(result)
