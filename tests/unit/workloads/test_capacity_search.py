"""The capacity search on one dense real curve: tiny-cpu's TP1 case measured at every level of a fine grid on the
real CPU vLLM (``tests/fixtures/capacity/record_tiny_cpu_curve.py``, explicit levels, no search involved).

The search is driven as the sweep drives it, each measurement answered by the recorded level. Its answers are
checked against the curve itself. The recorded curve is real, so not monotone: at 32 in flight one repetition
met the SLO for 89% of its requests and the other lost 8 requests (a dip); from 72 up every level misses. Its knee
is the highest level that met the SLO and the first level above it, which all miss.
"""

from __future__ import annotations

import math

import pytest

from afd_e2e.results.capacity_records import BRACKETED, NEVER_MEETS, NEVER_MISSES, NOT_MEASURED, CaseCapacity
from afd_e2e.results.performance_records import Repetition
from afd_e2e.results.status import Status
from afd_e2e.workloads.capacity_sweep.level_search import Observation, SearchPlan, estimate, next_level
from afd_e2e.workloads.capacity_sweep.sweep import _said, observation
from repo_paths import FIXTURES

CURVE_FIXTURE = FIXTURES / "capacity" / "tiny-cpu-curve.json"


@pytest.fixture(scope="module")
def curve() -> CaseCapacity:
    import json

    from afd_e2e.results.codec import from_json

    return from_json(CaseCapacity, json.loads(CURVE_FIXTURE.read_text(encoding="utf-8")))


def recorded(curve: CaseCapacity) -> dict[float, Observation]:
    observed = {}
    for level in curve.levels:
        obs = observation(level)
        assert obs is not None, f"level {level.level} was not measured"
        observed[level.level] = obs
    return observed


def knee(curve: CaseCapacity, grid: tuple[float, ...]) -> tuple[int, int]:
    """Indices of the curve's knee on ``grid``: the highest level that meets, and the first (missing) one above."""
    levels = {lv.level: lv for lv in curve.levels}
    last_met = max(i for i, lv in enumerate(grid) if levels[lv].meets_slo)
    assert all(not levels[lv].meets_slo for lv in grid[last_met + 1 :]), "every level above the knee misses"
    return last_met, last_met + 1


def run_search(plan: SearchPlan, curve_obs: dict[float, Observation]) -> tuple[dict[float, Observation], list[float]]:
    """The sweep's loop with the recorded curve answering; the observations and the order levels were measured."""
    observed: dict[float, Observation] = {}
    order = []
    while (level := next_level(plan, observed)) is not None:
        assert level not in observed, f"{level} measured twice"
        observed[level] = curve_obs[level]
        order.append(level)
    return observed, order


def test_the_curve_is_dense_real_and_has_a_knee(curve: CaseCapacity) -> None:
    assert len(curve.levels) >= 10
    assert not curve.search  # recorded at explicit levels: no search chose them
    for level in curve.levels:
        assert level.attainment is not None and level.repetitions  # every level measured
        assert all("--goodput" in rep.argv for rep in level.repetitions)
    failed = [lv.level for lv in curve.levels if lv.status is Status.FAILED]
    assert failed and all(lv < 64 for lv in failed)  # real: requests failed in a repetition below the knee
    grid = tuple(curve.grid)
    last_met, first_miss = knee(curve, grid)
    assert last_met > 0 and first_miss < len(grid) - 1, "the SLO puts the knee inside the recorded range"
    dips = [lv.level for lv in curve.levels[:last_met] if not lv.meets_slo]
    assert dips, "the curve dips below the target before its knee"


@pytest.mark.parametrize("coarse_step", [2, 3, 4, 6])
def test_starting_coarse_the_search_brackets_the_knee_within_one_recorded_level(
    curve: CaseCapacity, coarse_step: int
) -> None:
    grid = tuple(curve.grid)
    plan = SearchPlan(grid=grid, target=curve.slo.attainment, search=True, coarse_step=coarse_step)
    observed, order = run_search(plan, recorded(curve))
    result = estimate(plan, observed, unit=curve.unit)
    last_met, first_miss = knee(curve, grid)
    assert result.outcome == BRACKETED
    assert (result.passed_level, result.failed_level) == (grid[last_met], grid[first_miss])
    assert grid.index(result.failed_level) - grid.index(result.passed_level) == 1  # within one recorded level
    assert result.passed_level <= result.capacity <= result.failed_level
    assert f"between {result.passed_level:.3g} (passed" in result.text
    assert order[0] == grid[0]
    assert len(order) <= len(grid) // 2, "starting coarse measures at most half the levels"
    curve_obs = recorded(curve)
    assert all(not plan.meets(curve_obs[lv]) for lv in order if lv > result.failed_level)


def test_one_step_at_a_time_stops_at_the_first_dip(curve: CaseCapacity) -> None:
    """Climbing level by level, the search meets the dip before the knee and, knowing nothing above it, brackets
    it: why the shipped profiles start coarse (``coarse_step`` defaults to a quarter of the levels)."""
    grid = tuple(curve.grid)
    plan = SearchPlan(grid=grid, target=curve.slo.attainment, search=True, coarse_step=1)
    observed, order = run_search(plan, recorded(curve))
    result = estimate(plan, observed, unit=curve.unit)
    first_dip = next(lv.level for lv in curve.levels if not lv.meets_slo)
    assert result.failed_level == first_dip and order == list(grid[: grid.index(first_dip) + 1])
    _, first_miss = knee(curve, grid)
    curve_obs = recorded(curve)
    both = {**observed, **{lv: curve_obs[lv] for lv in grid[first_miss - 1 : first_miss + 1]}}
    assert estimate(plan, both, unit=curve.unit).failed_level == grid[first_miss]  # a pass above: the dip is passed


def test_the_interval_comes_from_the_repetitions_at_the_bracketing_levels(curve: CaseCapacity) -> None:
    grid = tuple(curve.grid)
    plan = SearchPlan(grid=grid, target=curve.slo.attainment, search=True, coarse_step=3)
    observed, _ = run_search(plan, recorded(curve))
    result = estimate(plan, observed, unit=curve.unit)
    assert result.interval is not None
    low, high = result.interval
    assert result.passed_level <= low <= result.capacity <= high <= result.failed_level
    single = {lv: Observation(obs.attainment, obs.attainments[:1]) for lv, obs in observed.items()}
    assert estimate(plan, single, unit=curve.unit).interval is None  # one repetition: no interval claimed


def test_a_curve_that_never_misses_is_reported_as_such(curve: CaseCapacity) -> None:
    grid = tuple(curve.grid)
    _, first_miss = knee(curve, grid)
    below = tuple(lv for lv in grid[:first_miss] if next(c for c in curve.levels if c.level == lv).meets_slo)
    plan = SearchPlan(grid=below, target=curve.slo.attainment, search=True, coarse_step=2)
    observed, _ = run_search(plan, recorded(curve))
    result = estimate(plan, observed, unit=curve.unit)
    assert result.outcome == NEVER_MISSES
    assert result.capacity == below[-1] and result.failed_level is None
    assert "never misses the SLO: capacity at least" in result.text


def test_a_curve_that_never_meets_is_reported_as_such(curve: CaseCapacity) -> None:
    grid = tuple(curve.grid)
    met = [lv.level for lv in curve.levels if lv.meets_slo]
    above = tuple(lv for lv in grid if lv > max(met))
    assert above, "the recorded curve must miss at its top"
    plan = SearchPlan(grid=above, target=curve.slo.attainment, search=True, coarse_step=2)
    observed, order = run_search(plan, recorded(curve))
    result = estimate(plan, observed, unit=curve.unit)
    assert result.outcome == NEVER_MEETS and result.capacity is None
    assert order == [above[0]]  # the lowest level missed: nothing else to learn
    assert result.text.startswith("never meets the SLO")


def test_explicit_levels_are_all_run_up_to_a_far_miss(curve: CaseCapacity) -> None:
    grid = tuple(curve.grid)
    curve_obs = recorded(curve)
    plan = SearchPlan(grid=grid, target=curve.slo.attainment, search=False)
    _, order = run_search(plan, curve_obs)
    assert order == list(grid)
    _, first_miss = knee(curve, grid)
    far = {lv: Observation(o.attainment, o.attainments, far_miss=lv >= grid[first_miss]) for lv, o in curve_obs.items()}
    _, order = run_search(plan, far)
    assert order == list(grid[: first_miss + 1])  # levels above a far miss are skipped


def test_an_earlier_compared_case_s_levels_are_measured_first(curve: CaseCapacity) -> None:
    grid = tuple(curve.grid)
    required = (grid[2], grid[-2])
    plan = SearchPlan(grid=grid, target=curve.slo.attainment, search=True, coarse_step=3, required=required)
    observed, _ = run_search(plan, recorded(curve))
    assert set(required) <= set(observed)
    last_met, first_miss = knee(curve, grid)
    result = estimate(plan, observed, unit=curve.unit)
    assert (result.passed_level, result.failed_level) == (grid[last_met], grid[first_miss])


def test_cut_short_and_nothing_measured_say_so(curve: CaseCapacity) -> None:
    grid = tuple(curve.grid)
    plan = SearchPlan(grid=grid, target=curve.slo.attainment, search=True, coarse_step=4)
    curve_obs = recorded(curve)
    observed = {}
    for _ in range(2):  # the budget allowed two levels
        level = next_level(plan, observed)
        assert level is not None
        observed[level] = curve_obs[level]
    result = estimate(plan, observed, unit=curve.unit, cut_short=True)
    assert result.cut_short and "cut short" in result.text
    assert result.outcome in (BRACKETED, NEVER_MISSES)
    empty = estimate(plan, {}, unit=curve.unit, cut_short=True)
    assert empty.outcome == NOT_MEASURED and "cut short" in empty.text


def test_the_recorded_levels_interpolate_inside_their_bracket(curve: CaseCapacity) -> None:
    grid = tuple(curve.grid)
    plan = SearchPlan(grid=grid, target=curve.slo.attainment, search=False)
    result = estimate(plan, recorded(curve), unit=curve.unit)
    low, high = result.passed_level, result.failed_level
    a_low = next(lv.attainment for lv in curve.levels if lv.level == low)
    a_high = next(lv.attainment for lv in curve.levels if lv.level == high)
    expected = low + (a_low - curve.slo.attainment) / (a_low - a_high) * (high - low)
    assert math.isclose(result.capacity, expected)


def test_the_progress_line_says_whether_a_repetition_met_the_slo_not_only_that_it_ran():
    ran = Repetition(1, Status.PASSED, "", "", "")
    assert _said(ran, 0.09, 0.9) == "attainment 9%, misses the SLO (target 90%)"
    assert _said(ran, 0.95, 0.9) == "attainment 95%, meets the SLO (target 90%)"
    broken = Repetition(1, Status.FAILED, "bench.json: completed is missing", "", "")
    assert _said(broken, None, 0.9) == "failed (bench.json: completed is missing)"
