"""The capacity search, pure: which level to measure next given what was measured, and what the measurements say
about the capacity at SLO.

The levels form a grid (explicit levels, or ``start..upper`` in ``levels`` steps) shared by every case of a run, so
the cases' curves overlay. With a search, going up from the lowest level the search measures every
``coarse_step``-th grid level until one misses the SLO, then bisects the grid between the highest level that met it
and the lowest that missed, until the two are neighbours. The capacity is then interpolated where the attainment
crosses the target between them. Levels above a miss are never needed; levels above a *far* miss (attainment below
``far_miss_below``) are skipped also with explicit levels. ``required`` levels (those an earlier compared case was
measured at) are measured first, lowest first, so that compared cases share their levels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from afd_e2e.results.capacity_records import (
    BRACKETED,
    INTERVAL_BRACKET,
    INTERVAL_CROSSING,
    NEVER_MEETS,
    NEVER_MISSES,
    NOT_MEASURED,
    CapacityEstimate,
)
from afd_e2e.workloads import stats


@dataclass(frozen=True)
class Observation:
    """What one measured level says: its pooled attainment and the per-repetition attainments behind it."""

    attainment: float
    attainments: tuple[float, ...] = ()
    far_miss: bool = False


@dataclass(frozen=True)
class SearchPlan:
    grid: tuple[float, ...]  # ascending
    target: float  # the attainment a level must reach
    search: bool  # False: measure every grid level (explicit levels)
    coarse_step: int = 1
    required: tuple[float, ...] = ()  # grid levels to measure first (an earlier compared case's)

    def meets(self, observation: Observation) -> bool:
        return observation.attainment >= self.target


def _bracket(plan: SearchPlan, observed: Mapping[float, Observation]) -> tuple[int | None, int | None]:
    """Grid indices of the highest level that met the SLO and of the lowest level above it that missed (either
    None when there is none). A miss below a level that met is a dip, not the knee: the case was seen to carry
    more, so the capacity is sought above it."""
    indices = {level: i for i, level in enumerate(plan.grid)}
    met = [indices[lv] for lv, obs in observed.items() if lv in indices and plan.meets(obs)]
    highest_met = max(met) if met else None
    missed = [
        indices[lv]
        for lv, obs in observed.items()
        if lv in indices and not plan.meets(obs) and (highest_met is None or indices[lv] > highest_met)
    ]
    return highest_met, (min(missed) if missed else None)


def _above_far_miss(plan: SearchPlan, observed: Mapping[float, Observation], level: float) -> bool:
    return any(obs.far_miss and lv < level for lv, obs in observed.items())


def next_level(plan: SearchPlan, observed: Mapping[float, Observation]) -> float | None:
    """The next grid level to measure, or None when the measurements are enough (or nothing more may be run)."""
    for level in sorted(plan.required):
        if level not in observed and not _above_far_miss(plan, observed, level):
            return level
    if not plan.search:
        pending = [lv for lv in plan.grid if lv not in observed and not _above_far_miss(plan, observed, lv)]
        return pending[0] if pending else None
    last = len(plan.grid) - 1
    met, miss = _bracket(plan, observed)
    if miss is None:  # still climbing: coarse steps from the highest level that met the SLO
        if met is None:
            return plan.grid[0]
        return None if met == last else plan.grid[min(met + plan.coarse_step, last)]
    low = -1 if met is None else met
    if miss - low <= 1:
        return None
    candidates = [i for i in range(low + 1, miss) if plan.grid[i] not in observed]
    if not candidates:
        return None
    middle = (low + miss) / 2
    return plan.grid[min(candidates, key=lambda i: (abs(i - middle), i))]


def _crossing(low: float, high: float, a_low: float, a_high: float, target: float) -> float:
    """Where the straight line through (low, a_low) and (high, a_high) falls to ``target``. Called only on a line
    that falls through it (``a_low >= target > a_high``), so the point lies in [low, high]: the clamp is for
    rounding."""
    x = low + (a_low - target) / (a_low - a_high) * (high - low)
    return min(max(x, low), high)


def _interval(
    low: float, high: float, a_low: Observation, a_high: Observation, target: float, capacity: float
) -> tuple[list[float], list[str]] | None:
    """Where the capacity may lie given the repetitions' spread at the two bracketing levels, and what each end is.

    Each level's attainment has a 95% t-interval; the lowest line through the two bands crosses the target first,
    the highest last, and the crossing of any line between them lies between. Where the lowest line is already
    below the target at the passed level (the band there reaches under it), no line through the bands places the
    lower end inside the bracket: the end is the passed level itself, marked ``bracket`` (the spread says no more
    than the sweep's bracket; the capacity may even lie below it). Likewise the upper end is the failed level when
    the highest line still meets the target there. Otherwise an end is a ``crossing``. Either way the ends are
    ordered and hold the estimate (min/max with it only absorbs rounding). None without two repetitions at each
    level."""
    h_low, h_high = _half_width(a_low.attainments), _half_width(a_high.attainments)
    if h_low is None or h_high is None:
        return None
    lower_low, lower_high = a_low.attainment - h_low, a_high.attainment - h_high
    upper_low, upper_high = a_low.attainment + h_low, a_high.attainment + h_high
    if lower_low < target:
        start, start_kind = low, INTERVAL_BRACKET
    else:
        start, start_kind = min(_crossing(low, high, lower_low, lower_high, target), capacity), INTERVAL_CROSSING
    if upper_high >= target:
        end, end_kind = high, INTERVAL_BRACKET
    else:
        end, end_kind = max(_crossing(low, high, upper_low, upper_high, target), capacity), INTERVAL_CROSSING
    return [start, end], [start_kind, end_kind]


def _half_width(values: Sequence[float]) -> float | None:
    """Half the 95% t-interval of the mean of ``values``; None below two values."""
    if len(values) < 2:
        return None
    return stats.student_t_quantile(1.0 - (1.0 - stats.CONFIDENCE) / 2.0, len(values) - 1) * (
        stats.sample_std(values) / math.sqrt(len(values))
    )


def format_level(value: float) -> str:
    """A load as people write it: ``6``, ``6.5``, ``0.25``."""
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def estimate(
    plan: SearchPlan, observed: Mapping[float, Observation], *, unit: str, cut_short: bool = False
) -> CapacityEstimate:
    """The capacity at SLO the measurements support, said with its precision."""
    suffix = " (cut short: budgets.capacity_s ran out)" if cut_short else ""
    if not observed:
        return CapacityEstimate(NOT_MEASURED, "no level was measured" + suffix, cut_short=cut_short)
    met, miss = _bracket(plan, observed)
    grid = plan.grid
    if miss is not None and met is None:
        lowest = grid[miss]
        obs = observed[lowest]
        return CapacityEstimate(
            NEVER_MEETS,
            f"never meets the SLO: the lowest level measured, {format_level(lowest)} {unit}, missed it "
            f"(attainment {obs.attainment:.0%})" + suffix,
            failed_level=lowest,
            cut_short=cut_short,
        )
    assert met is not None
    low = grid[met]
    if miss is None:
        top = grid[-1]
        reached = "the highest level" if low == top else "the highest level measured"
        return CapacityEstimate(
            NEVER_MISSES,
            f"never misses the SLO: capacity at least {format_level(low)} {unit} ({reached}, "
            f"attainment {observed[low].attainment:.0%})" + suffix,
            capacity=low,
            passed_level=low,
            cut_short=cut_short,
        )
    high = grid[miss]
    a_low, a_high = observed[low], observed[high]
    capacity = _crossing(low, high, a_low.attainment, a_high.attainment, plan.target)
    spread = _interval(low, high, a_low, a_high, plan.target, capacity)
    interval, ends = spread or (None, None)
    width = "" if miss - met == 1 else f", {miss - met - 1} grid levels between them not measured"
    text = (
        f"capacity {format_level(capacity)} {unit}{_said_interval(spread)}, between {format_level(low)} "
        f"(passed, attainment {a_low.attainment:.0%}) and {format_level(high)} (failed, {a_high.attainment:.0%})"
        f"{width}" + suffix
    )
    return CapacityEstimate(
        BRACKETED,
        text,
        capacity=capacity,
        passed_level=low,
        failed_level=high,
        interval=interval,
        interval_ends=ends,
        cut_short=cut_short,
    )


def _said_interval(spread: tuple[list[float], list[str]] | None) -> str:
    """The interval in the estimate's sentence, saying which of its ends are only the bracket's levels."""
    if spread is None:
        return ""
    interval, ends = spread
    shown = f"{format_level(interval[0])} to {format_level(interval[1])}"
    if ends == [INTERVAL_BRACKET, INTERVAL_BRACKET]:
        return f" (95% interval {shown}, only the bracket)"
    if ends[0] == INTERVAL_BRACKET:
        return f" (95% interval {shown}, lower end only the passed level)"
    if ends[1] == INTERVAL_BRACKET:
        return f" (95% interval {shown}, upper end only the failed level)"
    return f" (95% interval {shown})"
