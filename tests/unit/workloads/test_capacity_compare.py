"""Capacity at SLO compared, on sweeps made from the dense real curve (the recorded tiny-cpu levels, searched by
the product's own search): equal hardware, per GPU, one-sided bounds, a cut-short sweep, the ``on_worse`` gate."""

from __future__ import annotations

import dataclasses
import json

import pytest

from afd_e2e.results.capacity_records import BRACKETED, NEVER_MEETS, CaseCapacity
from afd_e2e.results.codec import from_json
from afd_e2e.results.status import Status, Verdict
from afd_e2e.workloads.capacity_sweep.compare import compare_capacity, describe_capacity
from afd_e2e.workloads.capacity_sweep.level_search import SearchPlan, estimate, next_level
from afd_e2e.workloads.capacity_sweep.sweep import observation
from repo_paths import FIXTURES


@pytest.fixture(scope="module")
def curve() -> CaseCapacity:
    text = (FIXTURES / "capacity" / "tiny-cpu-curve.json").read_text(encoding="utf-8")
    return from_json(CaseCapacity, json.loads(text))


def searched(curve: CaseCapacity, *, grid=None, gpus: int = 0, budget_levels: int | None = None) -> CaseCapacity:
    """The curve as a search over ``grid`` would have measured it (at most ``budget_levels`` levels)."""
    grid = tuple(grid or curve.grid)
    by_level = {lv.level: lv for lv in curve.levels}
    plan = SearchPlan(grid=grid, target=curve.slo.attainment, search=True, coarse_step=3)
    observed, levels = {}, []
    while (level := next_level(plan, observed)) is not None:
        if budget_levels is not None and len(levels) == budget_levels:
            break
        levels.append(by_level[level])
        observed[level] = observation(by_level[level])
    cut = budget_levels is not None and next_level(plan, observed) is not None
    failed = [lv for lv in levels if lv.status is Status.FAILED]  # real: some repetitions lost requests
    return dataclasses.replace(
        curve,
        status=Status.FAILED if failed else Status.PASSED,
        failure=failed[0].failure if failed else None,
        grid=list(grid),
        search=True,
        gpus=gpus,
        levels=sorted(levels, key=lambda lv: lv.level),
        estimate=estimate(plan, observed, unit=curve.unit, cut_short=cut),
    )


def test_the_same_curve_on_equal_hardware_is_parity(curve):
    side = searched(curve)
    result = compare_capacity("a", side, "b", side, threshold_pct=5.0, on_worse="fail")
    assert side.estimate.outcome == BRACKETED
    assert result.status is Status.PASSED and not result.per_gpu
    assert result.delta_pct == 0.0 and result.verdict is Verdict.PARITY
    assert result.ci95_pct[0] <= 0.0 <= result.ci95_pct[1]  # from the repetitions at the bracketing levels
    assert result.common_levels == [lv.level for lv in side.levels]
    assert "delta +0.0%" in describe_capacity(result, "native", "AFD")


def test_unequal_gpu_counts_compare_per_gpu_and_the_gate_fails_a_worse_candidate(curve):
    native, afd = searched(curve, gpus=1), searched(curve, gpus=2)
    result = compare_capacity("native", native, "afd", afd, threshold_pct=5.0, on_worse="fail")
    assert result.per_gpu and result.unit == "concurrent requests per GPU"
    assert result.candidate_value == pytest.approx(result.baseline_value / 2)
    assert result.delta_pct == pytest.approx(-50.0)
    assert result.verdict is Verdict.WORSE and result.status is Status.FAILED
    assert "capacity per GPU worse: -50.0%" in result.failure
    warned = compare_capacity("native", native, "afd", afd, threshold_pct=5.0, on_worse="warn")
    assert warned.status is Status.PASSED and warned.warnings and "worse" in warned.warnings[0]
    noted = compare_capacity("native", native, "afd", afd, threshold_pct=5.0, on_worse="note")
    assert noted.status is Status.PASSED and not noted.warnings
    control = compare_capacity("native", native, "afd", afd, threshold_pct=5.0, on_worse="fail", control=True)
    assert control.status is Status.PASSED  # a forced-routing control is never gated


def test_one_sided_bounds_that_overlap_are_inconclusive(curve):
    met = max(lv.level for lv in curve.levels if lv.meets_slo)
    never_meets = searched(curve, grid=[lv for lv in curve.grid if lv > met])
    assert never_meets.estimate.outcome == NEVER_MEETS
    bracketed = searched(curve)
    result = compare_capacity("a", bracketed, "b", never_meets, threshold_pct=5.0, on_worse="fail")
    assert result.verdict is Verdict.INCONCLUSIVE and result.delta_pct is None
    assert result.status is Status.PASSED


def test_a_cut_short_sweep_warns_and_a_missing_or_failed_side_says_which(curve):
    full, cut = searched(curve), searched(curve, budget_levels=2)
    assert cut.estimate.cut_short
    result = compare_capacity("a", full, "b", cut, threshold_pct=5.0, on_worse="warn")
    assert any("case b: sweep cut short" in w for w in result.warnings)
    skipped = compare_capacity("a", full, "b", None, threshold_pct=5.0, on_worse="fail")
    assert skipped.status is Status.SKIPPED and skipped.failure == "case b recorded no capacity sweep"
    low = searched(curve, grid=curve.grid[:3])  # 16, 32, 48: requests failed in a repetition at 32 and at 48
    assert low.status is Status.FAILED
    failed = compare_capacity("a", full, "b", low, threshold_pct=5.0, on_worse="warn")
    assert failed.status is Status.FAILED and failed.failure.startswith("case b: repetition 2: ")
    assert "of 256 requests failed" in failed.failure


def test_brackets_without_an_interval_decide_when_apart_and_only_then(curve):
    """One repetition a level gives no interval: the brackets themselves are the ranges (a real CPU run: cpu-tp1
    between 8 and 16 concurrent requests, one sequence at a time between 1 and 8)."""
    side = searched(curve)

    def bracketed(passed: float, failed: float) -> CaseCapacity:
        estimate = dataclasses.replace(
            side.estimate, outcome=BRACKETED, passed_level=passed, failed_level=failed, interval=None,
            capacity=(passed + failed) / 2,
        )  # fmt: skip
        return dataclasses.replace(side, estimate=estimate)

    apart = compare_capacity("tp1", bracketed(8, 16), "seqs1", bracketed(1, 8), threshold_pct=5.0, on_worse="fail")
    assert apart.ci95_pct is None and apart.delta_pct is not None
    assert apart.verdict is Verdict.WORSE and apart.status is Status.FAILED
    assert "the candidate's range lies below the baseline's" in apart.failure
    better = compare_capacity("seqs1", bracketed(1, 8), "tp1", bracketed(8, 16), threshold_pct=5.0, on_worse="fail")
    assert better.verdict is Verdict.BETTER and better.status is Status.PASSED
    same = compare_capacity("a", bracketed(1, 8), "b", bracketed(1, 8), threshold_pct=5.0, on_worse="fail")
    assert same.verdict is Verdict.INCONCLUSIVE and same.status is Status.PASSED
