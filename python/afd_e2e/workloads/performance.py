"""Performance comparison: per metric, mean ± std over passed repetitions of each side, delta, interval, verdict,
and the metric's gate: a ``worse`` verdict fails the comparison (``on_worse: fail``), warns (``warn``) or is only
shown (``note``). A forced-routing control is never gated: its metrics are shown, not judged."""

from __future__ import annotations

import math
from collections.abc import Sequence

from afd_e2e.profile import MetricGate
from afd_e2e.results.execution import CaseExecution
from afd_e2e.results.model import CasePerformance, MetricComparison, PerformanceComparison, SideStats
from afd_e2e.results.status import Proof, Status, Verdict
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
