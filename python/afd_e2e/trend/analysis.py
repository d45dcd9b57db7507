"""The regression call for one series (a case's metric over the history window, then tonight). Pure.

Robust to noisy nights: the history's centre is its median and its spread the MAD scaled to a standard deviation
(1.4826 * MAD), so one outlier in the past neither moves the centre nor widens the band much. A value has *moved*
when it lies beyond ``median ± (3 * spread + threshold% of |median|)``: outside the normal spread by more than the
profile's threshold. Two calls:

- change-point: the earliest night from which every later night, tonight included (at least two nights), moved
  the same way against the nights before it (at least three); that night is the build where it started;
- otherwise tonight alone moved against the whole window; tonight is where it started.

A move in the worse direction is a regression, in the better one an improvement; anything else is steady.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from afd_e2e.trend.record import BuildRef, Metric

MIN_HISTORY = 3  # fewer earlier values: too little history to call anything
MIN_BEFORE_CHANGE = 3  # a change-point needs this many nights before it
MIN_CHANGED_NIGHTS = 2  # ... and this many nights (tonight included) after it
SPREAD_FACTOR = 3.0
MAD_TO_SIGMA = 1.4826

REGRESSION = "regression"
IMPROVEMENT = "improvement"
STEADY = "steady"
NO_HISTORY = "too little history"
NO_VALUE = "no value tonight"


@dataclass(frozen=True)
class Band:
    median: float
    spread: float  # robust standard deviation
    limit: float  # how far from the median a value may lie before it moved

    def direction(self, value: float) -> int:
        """+1 above the band, -1 below it, 0 inside."""
        if abs(value - self.median) <= self.limit:
            return 0
        return 1 if value > self.median else -1


def band(values: Sequence[float], threshold_pct: float) -> Band:
    median = statistics.median(values)
    spread = MAD_TO_SIGMA * statistics.median(abs(v - median) for v in values)
    return Band(median, spread, SPREAD_FACTOR * spread + threshold_pct / 100.0 * abs(median))


@dataclass(frozen=True)
class Call:
    case_id: str
    metric: Metric
    status: str  # REGRESSION | IMPROVEMENT | STEADY | NO_HISTORY | NO_VALUE
    history: int  # earlier values in the window
    median: float | None  # of the whole window
    spread: float | None
    tonight: float | None
    change_pct: float | None  # tonight against the median before the change (the window's, without one)
    started: BuildRef | None  # the first build that moved (regression or improvement only)
    moved_nights: int  # nights in the moved stretch, tonight included


def _change_point(values: Sequence[float], threshold_pct: float) -> tuple[int, Band, int] | None:
    """(index, band before it, direction) of the earliest night from which all later values moved one way."""
    last = len(values) - 1
    for start in range(MIN_BEFORE_CHANGE, last - MIN_CHANGED_NIGHTS + 2):
        before = band(values[:start], threshold_pct)
        directions = {before.direction(v) for v in values[start:]}
        if len(directions) == 1 and 0 not in directions:
            return start, before, directions.pop()
    return None


def call(
    case_id: str,
    metric: Metric,
    history: Sequence[tuple[BuildRef, float]],
    tonight: tuple[BuildRef, float | None],
    threshold_pct: float,
) -> Call:
    """The call for one series; ``history`` oldest first."""
    values = [value for _, value in history]
    whole = band(values, threshold_pct) if values else None
    common = {
        "case_id": case_id,
        "metric": metric,
        "history": len(values),
        "median": whole.median if whole else None,
        "spread": whole.spread if whole else None,
        "tonight": tonight[1],
    }
    if tonight[1] is None:
        return Call(**common, status=NO_VALUE, change_pct=None, started=None, moved_nights=0)
    if len(values) < MIN_HISTORY or whole is None:
        return Call(**common, status=NO_HISTORY, change_pct=None, started=None, moved_nights=0)
    builds = [build for build, _ in history] + [tonight[0]]
    series = [*values, tonight[1]]
    found = _change_point(series, threshold_pct)
    if found is None:
        found = (len(values), whole, whole.direction(tonight[1])) if whole.direction(tonight[1]) else None
    if found is None:
        return Call(**common, status=STEADY, change_pct=_pct(tonight[1], whole.median), started=None, moved_nights=0)
    start, before, direction = found
    worse = direction < 0 if metric.higher_is_better else direction > 0
    return Call(
        **common,
        status=REGRESSION if worse else IMPROVEMENT,
        change_pct=_pct(tonight[1], before.median),
        started=builds[start],
        moved_nights=len(series) - start,
    )


def _pct(value: float, reference: float) -> float | None:
    return None if reference == 0 else (value - reference) / abs(reference) * 100.0
