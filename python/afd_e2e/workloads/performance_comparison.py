"""Performance comparison: per metric, mean ± std over passed repetitions of each side, delta, both intervals, one of
four verdicts (``stats``: better, worse, parity by equivalence within the metric's margin, inconclusive with the
repetitions it would need), each side's noise, and the metric's gate: a ``worse`` verdict fails the comparison
(``on_worse: fail``), warns (``warn``) or is only shown (``note``); with ``require: parity`` an ``inconclusive`` one
fails it too. A forced-routing control is never gated: its metrics are shown, not judged.

Where the two cases occupy different numbers of GPUs every throughput metric is shown twice, in total and per GPU;
``workloads.bench.gated_throughput`` names the view that is gated (the other is shown, never gated).

``looks`` is the number of planned looks of a ranged series (``workloads.bench.repetitions: {min, max}``,
``workloads.sequential``): every verdict spends its share of the error rates (``stats``), at each look and in the
final comparison alike, so the final verdict is the last look's.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from afd_e2e.profile.bench_spec import MetricGate
from afd_e2e.results.execution_records import CaseExecution
from afd_e2e.results.performance_records import (
    CasePerformance,
    MetricComparison,
    PerformanceComparison,
    SequentialRecord,
    SideStats,
)
from afd_e2e.results.status import Proof, Status, Verdict
from afd_e2e.workloads import stats
from afd_e2e.workloads.bench import saturation_line


def passed_values(section: CasePerformance, key: str, indices: Collection[int] | None = None) -> list[float]:
    """The metric over passed repetitions (only those of ``indices``, 1-based, where given: the repetitions a
    sequential series judged); a value that is not a finite number is never aggregated."""
    values = [
        rep.metrics.get(key)
        for rep in section.repetitions
        if rep.status is Status.PASSED and (indices is None or rep.index in indices)
    ]
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]


def _side_problem(case_id: str, section: CasePerformance | None) -> str | None:
    if not section:
        return f"case {case_id} recorded no performance"
    if section.status is not Status.PASSED:
        passed = sum(rep.status is Status.PASSED for rep in section.repetitions)
        return f"case {case_id}: {passed} repetitions passed, {section.failure}"
    return None


def worse_line(metric: MetricComparison) -> str:
    """One line for a metric judged worse (which has a delta and an interval): name, delta and interval."""
    low, high = metric.ci95_pct or (math.nan, math.nan)
    level = "95% CI" if metric.looks == 1 else f"CI over {metric.looks} looks"
    return f"{metric.name} worse: {metric.delta_pct:+.2f}% ({level} [{low:+.2f}%, {high:+.2f}%])"


def not_parity_line(metric: MetricComparison) -> str:
    """One line for a ``require: parity`` metric that is not shown at parity: the verdict and its sentence."""
    why = metric.reason or f"judged {metric.verdict}"
    return f"{metric.name} not shown at parity (require: parity): {why}"


def undetectable_line(metric: MetricComparison) -> str:
    """One line for a metric whose repetitions could not see the change the profile asks (``detect_pct``)."""
    seen = (
        "no change (fewer than two repetitions a side)"
        if metric.detectable_pct is None
        else (f"±{metric.detectable_pct:.1f}%")
    )
    more = (
        f"about {metric.detect_repetitions} repetitions per side would reach it at this noise"
        if metric.detect_repetitions is not None
        else "no number of repetitions reaches it at this threshold and noise"
    )
    return f"{metric.name} can see {seen}, wider than the asked ±{metric.detect_pct:g}% (detect_pct): {more}"


def failing_lines(metric: MetricComparison) -> list[str]:
    """Why the metric fails its gate, a line per reason; empty where it passes (the comparison's ``control`` is the
    caller's to check): worse with ``on_worse: fail`` (or under ``require: parity``), not shown at parity under
    ``require: parity``, a detectable change wider than ``detect_pct``."""
    if not metric.gated:
        return []
    worse = metric.verdict is Verdict.WORSE
    not_parity = metric.require == "parity" and metric.verdict is not Verdict.PARITY
    lines = []
    if worse and (metric.on_worse == "fail" or not_parity):
        lines.append(worse_line(metric))
    elif not_parity:
        lines.append(not_parity_line(metric))
    if metric.undetectable:
        lines.append(undetectable_line(metric))
    return lines


def fails(metric: MetricComparison) -> bool:
    """Whether the metric fails its gate (the comparison's ``control`` is the caller's to check)."""
    return bool(failing_lines(metric))


@dataclass(frozen=True)
class _View:
    """One row to judge: a metric in total, or a throughput per GPU; ``gated`` False: shown, never gated."""

    gate: MetricGate
    key: str
    name: str
    unit: str
    divisors: tuple[int, int]
    view: str
    gated: bool


def _views(metrics: Sequence[MetricGate], gpus: tuple[int, int], gated_throughput: str) -> list[_View]:
    per_gpu = gpus[0] != gpus[1] and min(gpus) > 0
    views = []
    for gate in metrics:
        m = gate.metric
        if not (per_gpu and m.higher_is_better):
            views.append(_View(gate, m.key, m.name, m.unit, (1, 1), "total" if per_gpu else "", True))
            continue
        views.append(_View(gate, m.key, m.name, m.unit, (1, 1), "total", gated_throughput == "total"))
        views.append(
            _View(
                gate,
                f"{m.key}_per_gpu",
                f"{m.name} per GPU",
                f"{m.unit} per GPU",
                gpus,
                "per_gpu",
                gated_throughput == "per_gpu",
            )
        )
    return views


def _side(values: list[float]) -> SideStats:
    noise = stats.noise(values)
    return SideStats(
        stats.mean(values), stats.sample_std(values), values, noise.cv_pct, noise.warmup_pct, noise.outliers
    )


def _metric(view: _View, base: list[float], cand: list[float], threshold_pct: float, looks: int) -> MetricComparison:
    base = [v / view.divisors[0] for v in base]
    cand = [v / view.divisors[1] for v in cand]
    gate = view.gate
    summaries = stats.Summary.of(base), stats.Summary.of(cand)
    judged = stats.judge(
        *summaries,
        threshold_pct=threshold_pct,
        margin_pct=gate.margin_pct,
        higher_is_better=gate.metric.higher_is_better,
        looks=looks,
    )
    return MetricComparison(
        key=view.key,
        name=view.name,
        unit=view.unit,
        higher_is_better=gate.metric.higher_is_better,
        baseline=_side(base),
        candidate=_side(cand),
        delta_pct=judged.delta_pct,
        ci95_pct=judged.ci95_pct,
        verdict=judged.verdict,
        on_worse=gate.on_worse,
        margin_pct=gate.margin_pct,
        ci90_pct=judged.ci90_pct,
        require=gate.require,
        needed_repetitions=judged.needed,
        reason=judged.reason,
        looks=looks,
        view=view.view,
        gated=view.gated,
        detectable_pct=(reach := stats.detectable_pct(*summaries, threshold_pct=threshold_pct, looks=looks)),
        detect_pct=gate.detect_pct,
        detect_repetitions=(
            stats.repetitions_to_detect(*summaries, gate.detect_pct, threshold_pct=threshold_pct, looks=looks)
            if gate.detect_pct is not None and (reach is None or reach > gate.detect_pct)
            else None
        ),
    )


def judge_metrics(
    baseline: CasePerformance,
    candidate: CasePerformance,
    *,
    threshold_pct: float,
    metrics: Sequence[MetricGate],
    looks: int = 1,
    gated_throughput: str = "per_gpu",
    judged: SequentialRecord | None = None,
) -> list[MetricComparison]:
    """Every metric (and per-GPU view) both sides have passed values of, judged (over the repetitions the series
    ``judged``, where one ran)."""
    base_idx, cand_idx = _indices(judged)
    found = []
    for view in _views(metrics, (baseline.gpus, candidate.gpus), gated_throughput):
        key = view.gate.metric.key
        base, cand = passed_values(baseline, key, base_idx), passed_values(candidate, key, cand_idx)
        if base and cand:
            found.append(_metric(view, base, cand, threshold_pct, looks))
    return found


def _indices(record: SequentialRecord | None) -> tuple[set[int] | None, set[int] | None]:
    if record is None or not record.looks:
        return None, None
    return set(record.baseline_repetitions), set(record.candidate_repetitions)


def look(
    baseline: CasePerformance,
    candidate: CasePerformance,
    record: SequentialRecord,
    *,
    threshold_pct: float,
    metrics: Sequence[MetricGate],
    looks: int,
    gated_throughput: str = "per_gpu",
) -> dict[str, Verdict]:
    """One look of a sequential series: every gated metric view's verdict (``stats.quick_verdict``, the same as
    ``judge``'s) over the repetitions ``record`` names so far, at ``1/looks`` of both error rates. Gated: a metric
    whose verdict can fail the comparison (``on_worse: fail`` or ``require: parity``) in its gated view."""
    base_idx, cand_idx = set(record.baseline_repetitions), set(record.candidate_repetitions)
    verdicts = {}
    for view in _views(metrics, (baseline.gpus, candidate.gpus), gated_throughput):
        if not (view.gated and view.gate.gated):
            continue
        key = view.gate.metric.key
        base = [v / view.divisors[0] for v in passed_values(baseline, key, base_idx)]
        cand = [v / view.divisors[1] for v in passed_values(candidate, key, cand_idx)]
        if not (base and cand):
            verdicts[view.key] = Verdict.INCONCLUSIVE
            continue
        verdicts[view.key] = stats.quick_verdict(
            stats.Summary.of(base),
            stats.Summary.of(cand),
            threshold_pct=threshold_pct,
            margin_pct=view.gate.margin_pct,
            higher_is_better=view.gate.metric.higher_is_better,
            looks=looks,
        )
    return verdicts


def compare_case_performance(
    baseline_id: str,
    baseline: CasePerformance | None,
    candidate_id: str,
    candidate: CasePerformance | None,
    *,
    threshold_pct: float,
    control: bool,
    metrics: Sequence[MetricGate],
    gated_throughput: str = "per_gpu",
) -> PerformanceComparison:
    """The ``performance`` block of a comparison. Metrics use passed repetitions only; a side with failed
    repetitions fails the comparison (its figures are still shown); a side without any is ``skipped``. A metric
    judged ``worse`` with ``on_worse: fail``, or not ``parity`` with ``require: parity``, fails it; a worse ``warn``
    one lands in ``warnings``; a side whose judged repetitions were saturated, in ``saturated``. Where the pair ran
    a sequential series (its record on the candidate's section) the comparison judges the repetitions of its last
    look at that look's share of the error rates, so the final verdict is the last look's; otherwise the one look
    gets the whole error rates."""
    problems = [p for p in (_side_problem(baseline_id, baseline), _side_problem(candidate_id, candidate)) if p]
    result = PerformanceComparison(status=Status.PASSED, control=control)
    if not baseline or not candidate:
        result.status, result.failure = Status.SKIPPED, "; ".join(problems)
        return result
    result.sequential = next(
        (
            s.sequential
            for s in (candidate, baseline)
            if s.sequential and (s.sequential.baseline, s.sequential.candidate) == (baseline_id, candidate_id)
        ),
        None,
    )
    series = result.sequential if result.sequential is not None and result.sequential.looks else None
    result.metrics = judge_metrics(
        baseline,
        candidate,
        threshold_pct=threshold_pct,
        metrics=metrics,
        looks=series.planned_looks if series else 1,
        gated_throughput=gated_throughput,
        judged=series,
    )
    base_idx, cand_idx = _indices(series)
    for case_id, section, indices in ((baseline_id, baseline, base_idx), (candidate_id, candidate, cand_idx)):
        judged = [
            r for r in section.repetitions if r.status is Status.PASSED and (indices is None or r.index in indices)
        ]
        if line := saturation_line(judged):
            result.saturated.append(f"{case_id}: {line}")
    if not control:
        for metric in result.metrics:
            lines = failing_lines(metric)
            problems += lines
            worse = metric.verdict is Verdict.WORSE
            if worse and metric.gated and metric.on_worse == "warn" and worse_line(metric) not in lines:
                result.warnings.append(worse_line(metric))
    if problems:
        result.status, result.failure = Status.FAILED, "; ".join(problems)
    return result


def fold_shapes(result: PerformanceComparison) -> PerformanceComparison:
    """``result`` with every named shape's verdict folded into its own status and failure, each named: a shape
    that fails fails the comparison; one skipped (a side did not measure it) fails it too where the shape's
    ``workloads.bench`` one passed, since a shape the profile asks for and nobody measured is no evidence. Each
    shape's metrics, warnings and saturation stay under its name (``result.shapes``)."""
    problems = [
        f"shape {name}: {shaped.failure or shaped.status}"
        for name, shaped in result.shapes.items()
        if shaped.status in (Status.FAILED, Status.SKIPPED)
    ]
    if problems and result.status is not Status.SKIPPED:
        result.status = Status.FAILED
        result.failure = "; ".join([result.failure, *problems] if result.failure else problems)
    return result


# Words of a comparison id that name an execution mode: "eager-vs-graph" says the baseline runs eager and the
# candidate CUDA graphs.
MODE_WORDS = {
    "eager": "eager",
    "compiled": "compiled",
    "compile": "compiled",
    "graph": "cuda graphs",
    "graphs": "cuda graphs",
    "cudagraph": "cuda graphs",
    "cudagraphs": "cuda graphs",
}


def _named_modes(comparison_id: str) -> tuple[str | None, str | None]:
    """The modes an ``X-vs-Y`` comparison id names for its baseline and candidate (None where it names none)."""
    parts = comparison_id.lower().split("-vs-")
    if len(parts) != 2:
        return None, None
    named = [next((MODE_WORDS[w] for w in part.split("-") if w in MODE_WORDS), None) for part in parts]
    return named[0], named[1]


def _side_mode(side: str, case_id: str, said: str | None, execution: CaseExecution | None) -> str | None:
    """Why one side does not run the mode the comparison says (the id's word, else what the case asked), or None."""
    if execution is None or not execution.roles:
        return None
    for role in execution.roles:
        wanted = said or role.asked.mode
        if said is not None and role.asked.mode != said:
            return f"{side} {case_id}'s {role.process} role asked {role.asked.mode}, the comparison says {said}"
        if role.proof is Proof.CONTRADICTED:
            return f"{side} {case_id}'s {role.process} role did not run {wanted}: {role.reason}"
        if role.proof is Proof.UNPROVEN and execution.require_proof:
            return f"{side} {case_id}'s {role.process} role's {wanted} mode is unproven: {role.reason}"
    return None


def mode_problem(
    comparison_id: str,
    baseline_id: str,
    baseline: CaseExecution | None,
    candidate_id: str,
    candidate: CaseExecution | None,
) -> str | None:
    """Why a performance comparison must not judge its numbers: a side's proven mode is not the one the comparison
    says it compares (its id's ``X-vs-Y`` mode words, else each side's asked mode), or None."""
    said_base, said_cand = _named_modes(comparison_id)
    problems = [
        p
        for p in (
            _side_mode("baseline", baseline_id, said_base, baseline),
            _side_mode("candidate", candidate_id, said_cand, candidate),
        )
        if p
    ]
    return "execution modes: " + "; ".join(problems) if problems else None
