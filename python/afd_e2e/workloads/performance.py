"""Performance comparison: per metric, mean ± std over passed repetitions of each side, delta, interval, verdict,
and the metric's gate: a ``worse`` verdict fails the comparison (``on_worse: fail``), warns (``warn``) or is only
shown (``note``). A forced-routing control is never gated: its metrics are shown, not judged."""

from __future__ import annotations

import math
from collections.abc import Sequence

from afd_e2e.profile import MetricGate
from afd_e2e.results.model import CasePerformance, MetricComparison, PerformanceComparison, SideStats
from afd_e2e.results.status import Status, Verdict
from afd_e2e.workloads import stats


def _passed_values(section: CasePerformance, key: str) -> list[float]:
    """The metric over passed repetitions; a value that is not a finite number is never aggregated."""
    values = [rep.metrics.get(key) for rep in section.repetitions if rep.status is Status.PASSED]
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
    return f"{metric.name} worse: {metric.delta_pct:+.2f}% (95% CI [{low:+.2f}%, {high:+.2f}%])"


def _metric(gate: MetricGate, base: list[float], cand: list[float], threshold_pct: float) -> MetricComparison:
    base_mean, cand_mean = stats.mean(base), stats.mean(cand)
    delta_pct = ci_pct = None
    verdict = Verdict.INCONCLUSIVE
    if base_mean > 0.0:
        delta_pct = (cand_mean - base_mean) / base_mean * 100.0
        interval = stats.welch_interval(base, cand)
        ci_pct = None if interval is None else [bound / base_mean * 100.0 for bound in interval]
        verdict = stats.verdict(delta_pct, ci_pct, threshold_pct, gate.metric.higher_is_better)
    return MetricComparison(
        key=gate.metric.key,
        name=gate.metric.name,
        unit=gate.metric.unit,
        higher_is_better=gate.metric.higher_is_better,
        baseline=SideStats(base_mean, stats.sample_std(base), base),
        candidate=SideStats(cand_mean, stats.sample_std(cand), cand),
        delta_pct=delta_pct,
        ci95_pct=ci_pct,
        verdict=verdict,
        on_worse=gate.on_worse,
    )


def compare_performance(
    baseline_id: str,
    baseline: CasePerformance | None,
    candidate_id: str,
    candidate: CasePerformance | None,
    *,
    threshold_pct: float,
    control: bool,
    metrics: Sequence[MetricGate],
) -> PerformanceComparison:
    """The ``performance`` block of a comparison. Metrics use passed repetitions only; a side with failed
    repetitions fails the comparison (its figures are still shown); a side without any is ``skipped``. A metric
    judged ``worse`` with ``on_worse: fail`` fails it; with ``warn`` it lands in ``warnings``."""
    problems = [p for p in (_side_problem(baseline_id, baseline), _side_problem(candidate_id, candidate)) if p]
    result = PerformanceComparison(status=Status.PASSED, control=control)
    if not baseline or not candidate:
        result.status, result.failure = Status.SKIPPED, "; ".join(problems)
        return result
    for gate in metrics:
        base, cand = _passed_values(baseline, gate.metric.key), _passed_values(candidate, gate.metric.key)
        if base and cand:
            result.metrics.append(_metric(gate, base, cand, threshold_pct))
    worse = [m for m in result.metrics if m.verdict is Verdict.WORSE and not control]
    problems += [worse_line(m) for m in worse if m.on_worse == "fail"]
    result.warnings = [worse_line(m) for m in worse if m.on_worse == "warn"]
    if problems:
        result.status, result.failure = Status.FAILED, "; ".join(problems)
    return result
