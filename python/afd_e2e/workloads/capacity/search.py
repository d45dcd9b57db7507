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

from afd_e2e.results.capacity import BRACKETED, NEVER_MEETS, NEVER_MISSES, NOT_MEASURED, CapacityEstimate
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
    """Where the straight line through (low, a_low) and (high, a_high) reaches ``target``, kept within [low, high]."""
    if a_low == a_high:
        return low if a_low < target else high
    x = low + (a_low - target) / (a_low - a_high) * (high - low)
    return min(max(x, low), high)


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
    interval = None
    h_low, h_high = _half_width(a_low.attainments), _half_width(a_high.attainments)
    if h_low is not None and h_high is not None:
        interval = [
            _crossing(low, high, a_low.attainment - h_low, a_high.attainment - h_high, plan.target),
            _crossing(low, high, a_low.attainment + h_low, a_high.attainment + h_high, plan.target),
        ]
    width = "" if miss - met == 1 else f", {miss - met - 1} grid levels between them not measured"
    text = (
        f"capacity {format_level(capacity)} {unit}, between {format_level(low)} (passed, attainment "
        f"{a_low.attainment:.0%}) and {format_level(high)} (failed, {a_high.attainment:.0%}){width}" + suffix
    )
    return CapacityEstimate(
        BRACKETED,
        text,
        capacity=capacity,
        passed_level=low,
        failed_level=high,
        interval=interval,
        cut_short=cut_short,
    )
