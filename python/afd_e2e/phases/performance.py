"""The ``performance`` phase: warmups and formal repetitions of ``vllm bench serve`` on a case, each named load shape
after them, and its measure: two cases' repetitions compared metric by metric. Its parts, each where a reader of
that part looks, all below the phases because lower layers read them too:

- the profile section ``workloads.bench`` (``BenchSpec``, ``read_bench``, ``bench_spec``): ``profile/bench_spec.py``
  (the plan's series, preflight's load-shape flags, the capacity sweep's and the soak's readers, a bisect);
- the bench driver (argv, one bounded repetition, its result JSON and load, the warm client):
  ``workloads/bench.py``; the comparison's verdicts and gates: ``workloads/performance_comparison.py`` (on
  ``workloads/stats.py``); a ranged series' looks: ``workloads/sequential.py``, its blocks' effect:
  ``workloads/blocks.py``, driven by the runner (``runner/series_servers.py``), which keeps both sides up or
  launches a block;
- the case's and the comparison's ``performance`` sections: ``results/performance_records.py``;
- the testcases, the annotation's tables per comparison and load shape, and the plot:
  ``report/performance_report.py``, registered by ``phases/rendering.py``.

This module runs the phase and registers it: the profile section, ``budgets.bench_repetition_s`` (default 3600, per
repetition: the phase's whole budget counts every warmup and repetition of every shape), the ``vllm`` executable
checked at admission, the case's ``performance`` section and the ``performance`` measure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from pathlib import Path

from afd_e2e.phases.registry import Budget, Measure, Phase, ResultsSection, Workload
from afd_e2e.plan.model import ComparisonPlan
from afd_e2e.profile import Profile
from afd_e2e.profile.bench_spec import NAME as BENCH
from afd_e2e.profile.bench_spec import BenchSpec, bench_spec, read_bench
from afd_e2e.results.model import CaseResults
from afd_e2e.results.performance_records import SECTION, CasePerformance, PerformanceComparison
from afd_e2e.results.status import Status
from afd_e2e.system.executables import resolve_executable
from afd_e2e.workloads import bench, performance_comparison
from afd_e2e.workloads.completions import CompletionError, served_model_root
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome, worst_outcome

NAME = SECTION


def _needs_bench(profile: Profile) -> tuple[str, str] | None:
    """The phase and its measure both read ``workloads.bench``: the load, the repetitions and the gates."""
    if BENCH in profile.workloads:
        return None
    return "performance phase without workloads.bench", "add workloads.bench"


def _needs_bench_to_compare(profile: Profile) -> tuple[str, str] | None:
    if BENCH in profile.workloads:
        return None
    return "performance measure without workloads.bench", "add it"


def _phase_budget_s(profile: Profile, per_repetition_s: float) -> float:
    """Every warmup and formal repetition's budget, each named shape's too, plus one request for the model card."""
    spec = bench_spec(profile)
    specs = (spec, *(shaped for _, shaped in spec.shapes)) if spec else ()
    repetitions = sum(s.warmups + s.most_repetitions for s in specs)
    return repetitions * per_repetition_s + profile.budgets.request_s


def check_performance_inputs(profile: Profile, gsm8k_dir: Path | None) -> None:
    """A ``vllm`` executable for the bench."""
    if bench_spec(profile) is not None:
        resolve_executable(profile.engine.executable)


def run_performance(ctx: PhaseContext) -> PhaseOutcome:
    """One warmup and N formal ``vllm bench serve`` repetitions, tokenizer = the checkpoint the server loaded; then
    each named load shape's own series (``workloads.bench.shapes``), into the section's ``shapes``; all in the case's
    warm client (``ctx.bench_client``). A shape that fails fails the phase naming it; a cancel or a timed-out
    repetition (a hung server) ends the phase before the next shape."""
    spec = bench_spec(ctx.profile)
    assert spec is not None  # the phase's needs
    case = ctx.case
    publish = partial(ctx.record, SECTION)
    executable = resolve_executable(ctx.profile.engine.executable)
    try:
        tokenizer = served_model_root(case.base_url, case.served_model_name, timeout_s=ctx.profile.budgets.request_s)
    except CompletionError as exc:
        section = CasePerformance(Status.FAILED, str(exc))
        publish(section)
    else:
        target = bench.Target(
            case.id,
            case.base_url,
            case.served_model_name,
            tokenizer,
            bench.client_env(ctx.client_env(bench.PROCESS_NAME)),
        )
        timed_out: list[str] = []

        def on_timeout(reason: str) -> None:
            timed_out.append(reason)
            ctx.take_forensics("timeout", reason)

        def series(spec: BenchSpec, shape: str, publish: Callable[[CasePerformance], None]) -> CasePerformance:
            return bench.run_bench_series(
                spec,
                target,
                executable=executable,
                out_dir=ctx.out_dir,
                publish=publish,
                progress=ctx.progress,
                cancelled=ctx.cancelled,
                heartbeat_s=bench.PROGRESS_EVERY_S,
                on_timeout=on_timeout,
                diagnose=ctx.diagnose,
                client=ctx.bench_client,
                shape=shape,
            )

        section = series(spec, "", publish)
        outcomes = [PhaseOutcome(section.status, section.failure)]
        for name, shape_spec in spec.shapes:
            if ctx.cancelled.is_set() or timed_out:  # a hung server would time out the next shape too
                break
            shaped = series(shape_spec, name, lambda shaped, name=name: _publish_shape(publish, section, name, shaped))
            outcomes.append(PhaseOutcome(shaped.status, shaped.failure and f"shape {name}: {shaped.failure}"))
        return worst_outcome(outcomes)
    return worst_outcome([PhaseOutcome(section.status, section.failure)])


def _publish_shape(
    publish: Callable[[CasePerformance], None], section: CasePerformance, name: str, shaped: CasePerformance
) -> None:
    """A shape's series as it runs, in its case's section."""
    section.shapes[name] = shaped
    publish(section)


def compare_performance(
    profile: Profile, cmp: ComparisonPlan, base: CaseResults | None, cand: CaseResults | None, out_dir: Path
) -> PerformanceComparison:
    """The measure: each side's execution mode first (a side that did not run the mode the comparison says fails it
    before any number is judged), then ``workloads.bench``'s own series and each named shape's, each judged by its
    own gates, the shapes' verdicts folded into the comparison's."""
    spec = bench_spec(profile)
    assert spec is not None  # the measure's needs
    sides = [case.section("execution") if case else None for case in (base, cand)]
    if problem := performance_comparison.mode_problem(cmp.id, cmp.baseline, sides[0], cmp.candidate, sides[1]):
        return PerformanceComparison(Status.FAILED, problem, control=cmp.control)  # before any number is judged
    sections: list[CasePerformance | None] = [case.section(SECTION) if case else None for case in (base, cand)]

    def judged(spec: BenchSpec, sides: list[CasePerformance | None]) -> PerformanceComparison:
        return performance_comparison.compare_case_performance(
            cmp.baseline,
            sides[0],
            cmp.candidate,
            sides[1],
            threshold_pct=spec.parity_threshold_pct,
            control=cmp.control,
            metrics=spec.metrics,
            gated_throughput=spec.gated_throughput,
        )

    result = judged(spec, sections)
    for name, shaped in spec.shapes:
        shaped_sides = [
            dataclasses.replace(side.shapes[name], gpus=side.gpus) if side and name in side.shapes else None
            for side in sections
        ]
        result.shapes[name] = judged(shaped, shaped_sides)
    return performance_comparison.fold_shapes(result)


PERFORMANCE = Phase(
    name=NAME,
    doc="warmups and formal repetitions of `vllm bench serve`",
    workloads=(Workload(BENCH, read=read_bench),),
    needs=_needs_bench,
    budget=Budget("bench_repetition_s", 3600.0, per="per repetition", total=_phase_budget_s),
    run=run_performance,
    check_inputs=check_performance_inputs,
    benches=True,
    # ``| None``: results written while performance was a field of every case and comparison hold ``null`` where
    # the phase or measure never ran
    sections=(ResultsSection(SECTION, CasePerformance | None),),
    measure=Measure(
        NAME, ResultsSection(SECTION, PerformanceComparison | None), compare_performance, needs=_needs_bench_to_compare
    ),
)
