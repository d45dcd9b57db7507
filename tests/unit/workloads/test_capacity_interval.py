"""Unit tier: a capacity interval is ordered, holds its estimate and says which of its ends are only the bracket's
levels; the comparison's interval holds its delta.

First on a real run: the 12-05 H200 sweep of native eager against native FULL_DECODE_ONLY graphs (issue 49), whose
recorded intervals were ``[12.79, 12.0]`` around 15.66 and ``[76.0, 76.0]`` around 74.47, and whose comparison said
``[408.8%, 403.7%]`` around +375.6%. Both cases are recomputed from their recorded per-level attainments by the
product's own search and comparison. Then on hand-made brackets: each band line (the 95% band's lower or upper edge
through the two bracketing levels) wholly below or above the target, falling or rising, and repetitions that agree.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from afd_e2e.results.capacity_records import (
    BRACKETED,
    INTERVAL_BRACKET,
    INTERVAL_CROSSING,
    CapacityEstimate,
    CaseCapacity,
)
from afd_e2e.results.codec import from_json
from afd_e2e.results.status import Verdict
from afd_e2e.workloads.capacity_sweep.compare import compare_capacity, describe_capacity
from afd_e2e.workloads.capacity_sweep.level_search import Observation, SearchPlan, estimate
from afd_e2e.workloads.capacity_sweep.sweep import observation
from repo_paths import SHARED

RUN = SHARED / "fixtures" / "gpu" / "runs-2026-12-05" / "capacity-eager-vs-graph.results.json"
TARGET = 0.9
LOW, HIGH = 10.0, 20.0


@pytest.fixture(scope="module")
def run() -> dict:
    return json.loads(RUN.read_text(encoding="utf-8"))


def recomputed(run: dict, case_id: str) -> tuple[CaseCapacity, CapacityEstimate]:
    """The case's sweep as recorded, and the estimate the product makes of its recorded levels."""
    section = from_json(CaseCapacity, run["cases"][case_id]["capacity"])
    plan = SearchPlan(grid=tuple(section.grid), target=section.slo.attainment, search=section.search)
    observed = {lv.level: observation(lv) for lv in section.levels}
    assert all(obs is not None for obs in observed.values())
    return section, estimate(plan, observed, unit=section.unit)


def assert_holds(est: CapacityEstimate) -> None:
    assert est.outcome == BRACKETED and est.interval is not None and est.interval_ends is not None
    low, high = est.interval
    assert est.passed_level <= low <= est.capacity <= high <= est.failed_level
    for end, level, kind in zip((low, high), (est.passed_level, est.failed_level), est.interval_ends, strict=True):
        assert kind in (INTERVAL_CROSSING, INTERVAL_BRACKET)
        if kind == INTERVAL_BRACKET:
            assert end == level  # a bracket end is the measured level itself, never a clamp to the other one


@pytest.mark.parametrize(
    ("case_id", "ends", "said"),
    [
        ("native-eager", [INTERVAL_CROSSING, INTERVAL_BRACKET], "(95% interval 12.8 to 20, upper end only the failed"),
        ("native-graph", [INTERVAL_BRACKET, INTERVAL_BRACKET], "(95% interval 68 to 76, only the bracket)"),
    ],
)
def test_the_12_05_run_s_intervals_hold_their_estimates(run: dict, case_id: str, ends: list[str], said: str) -> None:
    section, est = recomputed(run, case_id)
    recorded = section.estimate
    assert recorded is not None and recorded.interval is not None
    assert not recorded.interval[0] <= recorded.capacity <= recorded.interval[1]  # the run's own record: the bug
    assert (est.capacity, est.passed_level, est.failed_level) == (
        recorded.capacity,
        recorded.passed_level,
        recorded.failed_level,
    )  # the same bracket and estimate, only the interval differs
    assert_holds(est)
    assert est.interval_ends == ends and said in est.text


def test_the_12_05_comparison_holds_its_delta(run: dict) -> None:
    (eager, eager_est), (graph, graph_est) = recomputed(run, "native-eager"), recomputed(run, "native-graph")
    result = compare_capacity(
        "native-eager",
        dataclasses.replace(eager, estimate=eager_est),
        "native-graph",
        dataclasses.replace(graph, estimate=graph_est),
        threshold_pct=5.0,
        on_worse="warn",
    )
    recorded = run["comparisons"]["capacity"]["capacity"]
    assert not recorded["ci95_pct"][0] <= recorded["delta_pct"] <= recorded["ci95_pct"][1]  # the bug
    assert result.delta_pct == pytest.approx(recorded["delta_pct"])
    low, high = result.ci95_pct
    assert low <= result.delta_pct <= high
    # the lowest graph capacity over the highest eager one, and the highest over the lowest: 68/20 and 76/12.79
    assert low == pytest.approx(68 / 20 * 100 - 100) and high == pytest.approx(76 / eager_est.interval[0] * 100 - 100)
    assert result.verdict is Verdict.BETTER
    assert "delta +375.6% [+240.0%, +494.2%]: better" in describe_capacity(result, "eager", "graph")


def reps(pooled: float, spread: float) -> Observation:
    """A level whose two repetitions lie ``spread`` either side of its pooled attainment (half-width 12.7 x spread
    at 95% with one degree of freedom)."""
    return Observation(pooled, (pooled - spread, pooled + spread))


# Each row: the two bracketing levels (passed at 10, failed at 20, target 90%), and what each interval end must be.
# Band lines at 95% (t = 12.7 for two repetitions): spread 0.001 moves a level's band edges by 0.013, 0.002 by
# 0.025, 0.003 by 0.038, 0.006 by 0.076, 0.008 by 0.10, 0.01 by 0.13, 0.05 by 0.64.
GEOMETRIES = {
    "both band lines cross inside": (reps(0.95, 0.001), reps(0.85, 0.001), [INTERVAL_CROSSING, INTERVAL_CROSSING]),
    "lower line wholly below, falling": (reps(0.95, 0.006), reps(0.85, 0.002), [INTERVAL_BRACKET, INTERVAL_CROSSING]),
    "lower line wholly below, rising": (reps(0.95, 0.05), reps(0.85, 0.001), [INTERVAL_BRACKET, INTERVAL_CROSSING]),
    "upper line wholly above, falling": (reps(0.95, 0.003), reps(0.85, 0.008), [INTERVAL_CROSSING, INTERVAL_BRACKET]),
    "both lines past the target": (reps(0.95, 0.05), reps(0.85, 0.01), [INTERVAL_BRACKET, INTERVAL_BRACKET]),
    "upper line wholly above, rising": (reps(0.95, 0.001), reps(0.85, 0.05), [INTERVAL_CROSSING, INTERVAL_BRACKET]),
    "repetitions that agree": (reps(0.95, 0.0), reps(0.85, 0.0), [INTERVAL_CROSSING, INTERVAL_CROSSING]),
}


def bracket(passed: Observation, failed: Observation) -> CapacityEstimate:
    plan = SearchPlan(grid=(LOW, HIGH), target=TARGET, search=True)
    return estimate(plan, {LOW: passed, HIGH: failed}, unit="req/s")


@pytest.mark.parametrize("name", GEOMETRIES)
def test_every_band_geometry_gives_an_ordered_interval_holding_the_estimate(name: str) -> None:
    passed, failed, ends = GEOMETRIES[name]
    est = bracket(passed, failed)
    assert est.capacity == pytest.approx(15.0)  # the pooled line 95% -> 85% crosses 90% half-way
    assert_holds(est)
    assert est.interval_ends == ends


def test_repetitions_that_agree_give_the_estimate_itself() -> None:
    est = bracket(reps(0.95, 0.0), reps(0.85, 0.0))
    assert est.interval == [est.capacity, est.capacity]
    assert "(95% interval 15 to 15)" in est.text


@pytest.mark.parametrize("candidate", GEOMETRIES)
@pytest.mark.parametrize("baseline", GEOMETRIES)
def test_the_comparison_s_interval_holds_its_delta_whatever_each_side_s_ends(
    run: dict, baseline: str, candidate: str
) -> None:
    section, _ = recomputed(run, "native-eager")  # the run's records around two hand-made brackets
    sides = []
    for name, scale in ((baseline, 1.0), (candidate, 3.0)):
        passed, failed, _ = GEOMETRIES[name]
        plan = SearchPlan(grid=(LOW * scale, HIGH * scale), target=TARGET, search=True)
        est = estimate(plan, {LOW * scale: passed, HIGH * scale: failed}, unit=section.unit)
        sides.append(dataclasses.replace(section, estimate=est))
    result = compare_capacity("b", sides[0], "c", sides[1], threshold_pct=5.0, on_worse="warn")
    assert result.delta_pct == pytest.approx(200.0)
    assert result.ci95_pct[0] <= result.delta_pct <= result.ci95_pct[1]
