"""Capacity at SLO, candidate vs baseline: the delta, its interval from the repetitions at each side's bracketing
levels, a verdict and the profile's ``on_worse`` gate. Pure.

Where the two cases occupy different numbers of GPUs the compared figure is capacity per GPU (both are shown); on
the CPU (no GPUs) or on equal hardware it is the capacity itself. A side that never met or never missed the SLO has
a one-sided bound, and so has a bracket without repetitions to give an interval: the verdict is ``better``/``worse``
only when the two ranges do not overlap, else ``inconclusive``; a cut-short sweep on either side is a warning.
"""

from __future__ import annotations

import math

from afd_e2e.results.capacity_records import BRACKETED, NEVER_MEETS, NEVER_MISSES, CapacityComparison, CaseCapacity
from afd_e2e.results.status import Status, Verdict
from afd_e2e.workloads import stats
from afd_e2e.workloads.capacity_sweep.level_search import format_level


def _range(section: CaseCapacity, divisor: int) -> tuple[float, float] | None:
    """Where the capacity may lie (per ``divisor`` GPUs): the interval when bracketed with repetitions, the
    bracket itself without, [0, lowest] when it never met the SLO, [highest, inf) when it never missed."""
    est = section.estimate
    if est is None:
        return None
    if est.outcome == BRACKETED:
        assert est.passed_level is not None and est.failed_level is not None
        low, high = est.interval or [est.passed_level, est.failed_level]
    elif est.outcome == NEVER_MEETS:
        assert est.failed_level is not None
        low, high = 0.0, est.failed_level
    elif est.outcome == NEVER_MISSES:
        assert est.passed_level is not None
        low, high = est.passed_level, math.inf
    else:
        return None
    return low / divisor, high / divisor


def _ratio_range(baseline: tuple[float, float], candidate: tuple[float, float]) -> list[float]:
    """The delta's interval in %: ``candidate / baseline - 1`` over every pair of capacities the two ranges admit,
    lowest candidate over highest baseline to highest candidate over lowest baseline. It holds the delta whenever
    each range holds its capacity, and it keeps the baseline's own uncertainty, which a difference divided by the
    baseline's point estimate drops (a baseline that may be 20 puts a candidate of 68 at +240%, not at the +307%
    that form says). Ranges start at a level or a crossing above it, so the baseline's is positive."""
    return [(candidate[0] / baseline[1] - 1.0) * 100.0, (candidate[1] / baseline[0] - 1.0) * 100.0]


def _apart(baseline: tuple[float, float], candidate: tuple[float, float]) -> Verdict | None:
    """Better or worse when the ranges do not overlap. A range's upper end is a level that missed (the capacity lies
    below it), its lower end one that met the SLO or the interval's end: touching ranges are apart."""
    if candidate[0] >= baseline[1]:
        return Verdict.BETTER
    if candidate[1] <= baseline[0]:
        return Verdict.WORSE
    return None


def capacity_worse_line(result: CapacityComparison) -> str:
    figure = "capacity per GPU" if result.per_gpu else "capacity at SLO"
    if result.delta_pct is None or result.ci95_pct is None:
        return f"{figure} worse: the candidate's range lies below the baseline's"
    low, high = result.ci95_pct
    return f"{figure} worse: {result.delta_pct:+.1f}% (interval [{low:+.1f}%, {high:+.1f}%])"


def compare_capacity(
    baseline_id: str,
    baseline: CaseCapacity | None,
    candidate_id: str,
    candidate: CaseCapacity | None,
    *,
    threshold_pct: float,
    on_worse: str,
    control: bool = False,
) -> CapacityComparison:
    """The ``capacity`` block of a comparison."""
    missing = [
        f"case {cid} recorded no capacity sweep"
        for cid, s in ((baseline_id, baseline), (candidate_id, candidate))
        if s is None
    ]
    if baseline is None or candidate is None:
        return CapacityComparison(Status.SKIPPED, "", False, None, None, on_worse=on_worse, failure="; ".join(missing))
    per_gpu = baseline.gpus != candidate.gpus and baseline.gpus > 0 and candidate.gpus > 0
    result = CapacityComparison(
        status=Status.PASSED,
        unit=baseline.unit + (" per GPU" if per_gpu else ""),
        per_gpu=per_gpu,
        baseline=baseline.estimate,
        candidate=candidate.estimate,
        baseline_gpus=baseline.gpus,
        candidate_gpus=candidate.gpus,
        on_worse=on_worse,
        common_levels=sorted(
            {lv.level for lv in baseline.levels if lv.attainment is not None}
            & {lv.level for lv in candidate.levels if lv.attainment is not None}
        ),
    )
    problems = [
        f"case {cid}: {s.failure or s.status}"
        for cid, s in ((baseline_id, baseline), (candidate_id, candidate))
        if s.status is not Status.PASSED
    ]
    b_div, c_div = (baseline.gpus, candidate.gpus) if per_gpu else (1, 1)
    b_range, c_range = _range(baseline, b_div), _range(candidate, c_div)
    b_est, c_est = baseline.estimate, candidate.estimate
    if b_est and b_est.capacity is not None:
        result.baseline_value = b_est.capacity / b_div
    if c_est and c_est.capacity is not None:
        result.candidate_value = c_est.capacity / c_div
    both_bracketed = b_est is not None and c_est is not None and b_est.outcome == c_est.outcome == BRACKETED
    if both_bracketed and result.baseline_value and result.candidate_value is not None:
        base, cand = result.baseline_value, result.candidate_value
        result.delta_pct = (cand / base - 1.0) * 100.0  # the interval's own form: it holds the delta exactly
        if b_est.interval is not None and c_est.interval is not None and b_range and c_range:
            result.ci95_pct = _ratio_range(b_range, c_range)
        result.verdict = stats.verdict(
            result.delta_pct, result.ci95_pct, threshold_pct, higher_is_better=True, margin_pct=threshold_pct
        )
    if result.ci95_pct is None and b_range and c_range:  # no interval: the brackets or one-sided bounds decide
        result.verdict = _apart(b_range, c_range) or result.verdict
    for cid, est in ((baseline_id, b_est), (candidate_id, c_est)):
        if est is not None and est.cut_short:
            result.warnings.append(f"case {cid}: sweep cut short, {est.text}")
    if result.verdict is Verdict.WORSE and not control:
        if on_worse == "fail":
            problems.append(capacity_worse_line(result))
        elif on_worse == "warn":
            result.warnings.append(capacity_worse_line(result))
    if problems:
        result.status, result.failure = Status.FAILED, "; ".join(problems)
    return result


def describe_capacity(result: CapacityComparison, baseline_label: str, candidate_label: str) -> str:
    """One line: both capacities, per GPU where compared so, the delta, its interval and the verdict."""

    def side(label: str, value: float | None, text: str | None) -> str:
        figure = f"{format_level(value)} {result.unit}" if value is not None else "no capacity"
        return f"{label} {figure}" + (f" ({text})" if text else "")

    delta = "" if result.delta_pct is None else f", delta {result.delta_pct:+.1f}%"
    interval = "" if result.ci95_pct is None else f" [{result.ci95_pct[0]:+.1f}%, {result.ci95_pct[1]:+.1f}%]"
    return (
        f"{side(baseline_label, result.baseline_value, result.baseline.text if result.baseline else None)}; "
        f"{side(candidate_label, result.candidate_value, result.candidate.text if result.candidate else None)}"
        f"{delta}{interval}: {result.verdict}"
    )
