"""Aggregating repetitions into a comparison, the seed's published table reproduced from five runs a side, and the
performance gates: ``on_worse`` per metric, no claim below two repetitions a side, never parity from NaN."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from afd_e2e.profile import load_profile
from afd_e2e.profile.bench_spec import DEFAULT_BENCH_METRICS, MetricGate
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.results.performance_records import CasePerformance, PerformanceComparison, SideStats
from afd_e2e.results.status import Status, Verdict
from afd_e2e.workloads.comparisons import run_comparisons
from afd_e2e.workloads.performance_comparison import compare_case_performance
from results_docs import RESULTS_FIXTURES, load_fixture, typed

SEED = typed(load_fixture("seed"))
SEED_DIR = RESULTS_FIXTURES / "seed"
# The seed PR's table, as printed: metric key -> (native, AFD, delta).
SEED_TABLE = {
    "request_throughput": ("2.4047 ± 0.0195", "2.4295 ± 0.0092", "+1.03%"),
    "output_throughput": ("307.80 ± 2.50", "310.98 ± 1.18", "+1.03%"),
    "mean_ttft_ms": ("371.29 ± 13.39", "404.24 ± 6.16", "+8.87%"),
    "mean_tpot_ms": ("100.13 ± 0.78", "98.88 ± 0.38", "-1.25%"),
    "mean_itl_ms": ("100.13 ± 0.78", "98.88 ± 0.38", "-1.25%"),
    "mean_e2el_ms": ("13088.36 ± 109.82", "12962.50 ± 49.08", "-0.96%"),
}


def _printed(side: SideStats, like: str) -> str:
    decimals = len(like.split(" ± ")[0].split(".")[1])
    return f"{side.mean:.{decimals}f} ± {side.std:.{decimals}f}"


def _performance(case_id: str) -> CasePerformance:
    performance = copy.deepcopy(SEED.cases[case_id].section(PERFORMANCE))
    assert performance is not None
    return performance


def _gates(**on_worse: str) -> tuple[MetricGate, ...]:
    return tuple(MetricGate(metric, on_worse.get(metric.key, "warn")) for metric in DEFAULT_BENCH_METRICS)


WARN_ALL = _gates()


def _compare(native, afd, metrics=WARN_ALL, control: bool = False) -> PerformanceComparison:
    return compare_case_performance("native", native, "afd", afd, threshold_pct=2.0, control=control, metrics=metrics)


def _seed_sides() -> tuple[CasePerformance, CasePerformance]:
    return _performance("native-eager-dp8"), _performance("afd-eager-4a4f")


def _metric(result: PerformanceComparison, key: str):
    return next(m for m in result.metrics if m.key == key)


def test_seed_table_reproduced_from_five_repetitions_per_side():
    comparison = run_comparisons(load_profile("qwen3.5-122b-a10b"), SEED, SEED_DIR)["performance"]
    assert comparison.section(PERFORMANCE) is not None
    metrics = {m.key: m for m in comparison.section(PERFORMANCE).metrics}
    assert set(metrics) == set(SEED_TABLE)
    for key, (native, afd, delta) in SEED_TABLE.items():
        metric = metrics[key]
        assert len(metric.baseline.values) == len(metric.candidate.values) == 5
        assert _printed(metric.baseline, native) == native
        assert _printed(metric.candidate, afd) == afd
        assert metric.delta_pct == pytest.approx(float(delta.rstrip("%")), abs=0.005)
    assert (comparison.baseline_label, comparison.candidate_label) == ("native DP8/TP1/EP8", "AFD 4A4F")


def test_seed_verdicts_parity_except_ttft_which_warns():
    comparison = run_comparisons(load_profile("qwen3.5-122b-a10b"), SEED, SEED_DIR)["performance"].section(PERFORMANCE)
    assert comparison is not None
    verdicts = {m.key: m.verdict for m in comparison.metrics}
    assert verdicts.pop("mean_ttft_ms") is Verdict.WORSE
    assert set(verdicts.values()) == {Verdict.PARITY}
    assert comparison.status is Status.PASSED and comparison.control is False
    assert comparison.warnings == ["TTFT worse: +8.87% (95% CI [+4.46%, +13.29%])"]
    assert {m.on_worse for m in comparison.metrics} == {"warn"}


def test_on_worse_fail_fails_the_comparison_naming_the_metric():
    result = _compare(*_seed_sides(), metrics=_gates(mean_ttft_ms="fail"))
    assert (result.status, result.warnings) == (Status.FAILED, [])
    assert result.failure == "TTFT worse: +8.87% (95% CI [+4.46%, +13.29%])"


def test_on_worse_note_only_shows_the_metric():
    result = _compare(*_seed_sides(), metrics=_gates(mean_ttft_ms="note"))
    assert (result.status, result.failure, result.warnings) == (Status.PASSED, None, [])
    assert _metric(result, "mean_ttft_ms").verdict is Verdict.WORSE


def test_a_better_metric_never_fails_or_warns():
    native, afd = _seed_sides()
    result = _compare(afd, native, metrics=_gates(mean_ttft_ms="fail"))  # the sides swapped: TTFT is better
    assert _metric(result, "mean_ttft_ms").verdict is Verdict.BETTER
    assert (result.status, result.warnings) == (Status.PASSED, [])


def test_a_control_comparison_is_never_gated():
    result = _compare(*_seed_sides(), metrics=_gates(mean_ttft_ms="fail"), control=True)
    assert (result.status, result.failure, result.warnings) == (Status.PASSED, None, [])


@pytest.mark.parametrize("kept", [(1, 5), (5, 1), (1, 1)])
def test_below_two_passed_repetitions_a_side_there_is_no_interval_and_no_claim(kept):
    native, afd = _seed_sides()
    for side, count in zip((native, afd), kept, strict=True):
        for rep in side.repetitions[count:]:
            rep.status, rep.failure = Status.FAILED, "1 of 1024 requests failed"
    result = _compare(native, afd, metrics=_gates(mean_ttft_ms="fail"))
    ttft = _metric(result, "mean_ttft_ms")
    assert ttft.ci95_pct is None and ttft.delta_pct is not None and abs(ttft.delta_pct) > 2.0
    assert {m.verdict for m in result.metrics} == {Verdict.INCONCLUSIVE}
    assert result.warnings == [] and result.status is Status.PASSED


def test_a_non_finite_value_is_never_aggregated_and_never_makes_parity():
    native, afd = _seed_sides()
    for rep in afd.repetitions:
        rep.metrics["mean_tpot_ms"] = float("nan")
    afd.repetitions[0].metrics["mean_itl_ms"] = float("inf")
    afd.repetitions[1].metrics["mean_itl_ms"] = float("nan")
    result = _compare(native, afd)
    assert "mean_tpot_ms" not in {m.key for m in result.metrics}
    itl = _metric(result, "mean_itl_ms")
    assert len(itl.candidate.values) == 3 and all(v == v for v in itl.candidate.values)


def test_a_zero_baseline_mean_has_no_delta_and_no_claim():
    native, afd = _seed_sides()
    for rep in native.repetitions:
        rep.metrics["mean_ttft_ms"] = 0.0
    ttft = _metric(_compare(native, afd), "mean_ttft_ms")
    assert (ttft.delta_pct, ttft.ci95_pct, ttft.verdict) == (None, None, Verdict.INCONCLUSIVE)


def test_fixture_comparisons_are_what_compare_computes():
    assert run_comparisons(load_profile("qwen3.5-122b-a10b"), SEED, SEED_DIR) == SEED.comparisons


def test_failed_repetitions_fail_the_comparison_and_are_left_out():
    native = _performance("native-eager-dp8")
    native.repetitions[4] = replace(native.repetitions[4], status=Status.FAILED, failure="3 of 1024 requests failed")
    native.status, native.failure = Status.FAILED, "rep 5: 3 of 1024 requests failed"
    afd = _performance("afd-eager-4a4f")
    result = _compare(native, afd)
    assert result.status is Status.FAILED
    assert result.failure == "case native: 4 repetitions passed, rep 5: 3 of 1024 requests failed"
    assert all(len(m.baseline.values) == 4 for m in result.metrics)


def test_missing_side_is_skipped_and_control_is_marked():
    result = _compare(None, _performance("afd-eager-4a4f"), control=True)
    assert result == PerformanceComparison(Status.SKIPPED, "case native recorded no performance", control=True)


def test_p99_metrics_compared_when_present():
    sides = [_performance(c) for c in ("native-eager-dp8", "afd-eager-4a4f")]
    for side, value in zip(sides, (100.0, 150.0), strict=True):
        for index, rep in enumerate(side.repetitions):
            rep.metrics["p99_ttft_ms"] = value + index
    result = _compare(sides[0], sides[1])
    p99 = next(m for m in result.metrics if m.key == "p99_ttft_ms")
    assert p99.delta_pct == pytest.approx(50 / 102 * 100) and p99.verdict is Verdict.WORSE


def test_cases_that_read_the_same_are_told_apart_by_their_ids_in_a_comparison():
    # A case and its twin on a follower agent share a label: the first device run's parity table had two columns
    # both headed "native DP1/TP1/EP1".
    results = copy.deepcopy(SEED)
    comparison = results.plan.comparisons[0]
    baseline = next(c for c in results.plan.cases if c.id == comparison.baseline)
    results.plan = replace(
        results.plan,
        cases=[replace(c, label=baseline.label) if c.id == comparison.candidate else c for c in results.plan.cases],
    )
    entry = run_comparisons(load_profile("qwen3.5-122b-a10b"), results, SEED_DIR)[comparison.id]
    assert (entry.baseline_label, entry.candidate_label) == (
        f"{baseline.label} ({comparison.baseline})",
        f"{baseline.label} ({comparison.candidate})",
    )
    assert SEED.comparisons[comparison.id].baseline_label == baseline.label  # different labels stay as they are


def test_require_parity_fails_an_undecided_metric_with_the_repetitions_it_would_need():
    native, afd = _seed_sides()
    native.repetitions, afd.repetitions = native.repetitions[:2], afd.repetitions[:2]  # too few to decide TPOT
    required = tuple(
        MetricGate(m, "warn", margin_pct=1.0, require="parity" if m.key == "mean_tpot_ms" else "")
        for m in DEFAULT_BENCH_METRICS
    )
    unrequired = tuple(replace(gate, require="") for gate in required)

    assert _metric(_compare(native, afd, metrics=unrequired), "mean_tpot_ms").verdict is Verdict.INCONCLUSIVE
    result = _compare(native, afd, metrics=required)
    assert _metric(result, "mean_tpot_ms").verdict is Verdict.INCONCLUSIVE
    assert result.status is Status.FAILED
    assert result.failure is not None and result.failure.startswith("TPOT not shown at parity (require: parity): ")
    assert "is wider than the ±1% margin: about " in result.failure
    assert "repetitions per side would decide it" in result.failure
