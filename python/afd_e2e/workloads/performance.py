"""Performance comparison: per metric, mean ± std over passed repetitions of each side, delta, interval, verdict."""

from __future__ import annotations

from dataclasses import dataclass

from afd_e2e.results.model import CasePerformance, MetricComparison, PerformanceComparison, SideStats
from afd_e2e.results.status import Status
from afd_e2e.workloads import stats


@dataclass(frozen=True)
class Metric:
    key: str  # a ``vllm bench serve`` result key
    name: str
    unit: str
    higher_is_better: bool


METRICS = (
    Metric("request_throughput", "Request throughput", "req/s", True),
    Metric("output_throughput", "Output throughput", "tok/s", True),
    Metric("mean_ttft_ms", "TTFT", "ms", False),
    Metric("mean_tpot_ms", "TPOT", "ms", False),
    Metric("mean_itl_ms", "ITL", "ms", False),
    Metric("mean_e2el_ms", "E2E latency", "ms", False),
    Metric("p99_ttft_ms", "TTFT p99", "ms", False),
    Metric("p99_tpot_ms", "TPOT p99", "ms", False),
    Metric("p99_itl_ms", "ITL p99", "ms", False),
    Metric("p99_e2el_ms", "E2E latency p99", "ms", False),
)


def _passed_values(section: CasePerformance, key: str) -> list[float]:
    return [rep.metrics[key] for rep in section.repetitions if rep.status is Status.PASSED and key in rep.metrics]


def _side_problem(case_id: str, section: CasePerformance | None) -> str | None:
    if not section:
        return f"case {case_id} recorded no performance"
    if section.status is not Status.PASSED:
        passed = sum(rep.status is Status.PASSED for rep in section.repetitions)
        return f"case {case_id}: {passed} repetitions passed, {section.failure}"
    return None


def compare_performance(
    baseline_id: str,
    baseline: CasePerformance | None,
    candidate_id: str,
    candidate: CasePerformance | None,
    *,
    threshold_pct: float,
    control: bool,
) -> PerformanceComparison:
    """The ``performance`` block of a comparison. Metrics use passed repetitions only; a side with failed
    repetitions fails the comparison (its figures are still shown); a side without any is ``skipped``."""
    problems = [p for p in (_side_problem(baseline_id, baseline), _side_problem(candidate_id, candidate)) if p]
    result = PerformanceComparison(
        status=Status.FAILED if problems else Status.PASSED, failure="; ".join(problems) or None, control=control
    )
    if not baseline or not candidate:
        result.status = Status.SKIPPED
        return result
    for metric in METRICS:
        base, cand = _passed_values(baseline, metric.key), _passed_values(candidate, metric.key)
        if not base or not cand or stats.mean(base) == 0.0:
            continue
        base_mean, cand_mean = stats.mean(base), stats.mean(cand)
        delta_pct = (cand_mean - base_mean) / base_mean * 100.0
        interval = stats.welch_interval(base, cand)
        ci_pct = None if interval is None else [bound / base_mean * 100.0 for bound in interval]
        result.metrics.append(
            MetricComparison(
                key=metric.key,
                name=metric.name,
                unit=metric.unit,
                higher_is_better=metric.higher_is_better,
                baseline=SideStats(base_mean, stats.sample_std(base), base),
                candidate=SideStats(cand_mean, stats.sample_std(cand), cand),
                delta_pct=delta_pct,
                ci95_pct=ci_pct,
                verdict=stats.verdict(delta_pct, ci_pct, threshold_pct, metric.higher_is_better),
            )
        )
    return result
