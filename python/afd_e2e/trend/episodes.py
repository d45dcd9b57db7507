"""Regression episodes: one alert per stretch of moved nights, not one per night. Pure.

Walking one series (a case's metric, oldest night first), an episode **opens** on the night the change-point rule
(``analysis.moved``: a robust z-test of the last two or three nights against the baseline nights before them) first
sees the series moved the worse way, by a *material* amount: the changed nights' median at least
``materiality_sigma`` robust σ and ``materiality_pct`` % from the baseline's median (the profile's ``trend`` keys).
One night alone never opens one: a single-night spike is no change. Its first bad night is the first of the nights
that moved (so a bisect starts before the change, never inside it). While it is open the baseline is frozen (the
nights before it), so a long regression cannot become its own baseline; it **stays open** while later nights stay on
nearer the level the change moved to than that baseline's median, and **closes** at the first night back. Only nights whose run passed (or
warned) form a baseline or open an episode: a failed or crashed night (cancelled ones never reach the history) is
no evidence of normal, and its value (a run that broke) opens nothing, though it can keep an open episode open. The
episode names the last good night before it (a baseline night) and the first bad one, with their builds' commits:
the two revisions a bisect starts from.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from afd_e2e.trend.analysis import LIMITS, MIN_CHANGED_NIGHTS, MIN_HISTORY, Band, band, belongs, moved
from afd_e2e.trend.record import BuildRef, Metric


@dataclass(frozen=True)
class Night:
    build: BuildRef
    value: float
    baseline: bool  # the run passed (or warned): it may form a baseline


@dataclass(frozen=True)
class Episode:
    """A regression of one series: ``first_bad`` the night it opened, ``last_good`` the baseline night before it,
    ``closed_by`` the night it returned (None: still open), its nights and its largest move against the median."""

    case_id: str
    metric: Metric
    last_good: BuildRef
    first_bad: BuildRef
    nights: int
    worst_pct: float
    median: float
    closed_by: BuildRef | None = None
    opened: BuildRef | None = None  # the night the rule flagged it (the second or third bad night)

    @property
    def open(self) -> bool:
        return self.closed_by is None


@dataclass(frozen=True)
class Materiality:
    sigma: float  # robust standard deviations from the baseline's median
    pct: float  # % of the baseline's median


def _worse(metric: Metric, direction: int) -> bool:
    return direction < 0 if metric.higher_is_better else direction > 0


def _still_worse(metric: Metric, state: dict, value: float) -> bool:
    """An open episode's night still lies nearer the level its nights moved to than its frozen baseline's median
    (however much further: a night worse still is no spike that the episode could have started on)."""
    direction = -1 if metric.higher_is_better else 1
    return belongs(state["band"], value, state["changed"], direction, share=0.5, far=math.inf)


def _material(before: Band, changed: Sequence[float], materiality: Materiality) -> bool:
    move = abs(statistics.median(changed) - before.median)
    return move >= materiality.sigma * before.spread and move >= materiality.pct / 100.0 * abs(before.median)


def _opening(
    metric: Metric, nights: Sequence[Night], position: int, window: int, threshold_pct: float, materiality: Materiality
) -> dict | None:
    """The episode the rule opens at ``position``: the shortest stretch of the last nights (two or more, passing
    runs only) that moved the worse way against the baseline nights before it, by a material amount."""
    for k in range(MIN_CHANGED_NIGHTS, max(LIMITS) + 1):
        start = position - k + 1
        changed = nights[start : position + 1]
        if start < 0 or not all(n.baseline for n in changed):
            return None
        baseline = [n for n in nights[:start] if n.baseline][-window:]
        if len(baseline) < MIN_HISTORY:
            return None
        before = band([n.value for n in baseline])
        values = [n.value for n in changed]
        direction = moved(before, values, threshold_pct)
        if direction and _worse(metric, direction) and _material(before, values, materiality):
            while start > 0 and nights[start - 1].baseline:
                earlier = [n for n in nights[: start - 1] if n.baseline][-window:]
                if len(earlier) < MIN_HISTORY:
                    break
                candidate = band([n.value for n in earlier])
                if not belongs(candidate, nights[start - 1].value, [n.value for n in changed], direction):
                    break
                start, before, baseline = start - 1, candidate, earlier
                changed = nights[start : position + 1]
            values = [n.value for n in changed]
            return {
                "band": before,
                "changed": values,
                "last_good": baseline[-1].build,
                "first_bad": changed[0].build,
                "opened": nights[position].build,
                "nights": len(changed),
                "worst": max((_pct(v, before.median) for v in values), key=abs),
            }
    return None


def episodes(
    case_id: str,
    metric: Metric,
    nights: Sequence[Night],
    *,
    threshold_pct: float,
    materiality: Materiality,
    window: int,
) -> list[Episode]:
    """Every episode of the series, oldest first; the last may be open."""
    found: list[Episode] = []
    current: dict | None = None
    for position, night in enumerate(nights):
        if current is not None:
            if _still_worse(metric, current, night.value):
                current["nights"] += 1
                current["worst"] = max(current["worst"], _pct(night.value, current["band"].median), key=abs)
                continue
            found.append(_episode(case_id, metric, current, closed_by=night.build))
            current = None
            continue
        if found and found[-1].closed_by == night.build:
            continue
        current = _opening(metric, nights, position, window, threshold_pct, materiality)
    if current is not None:
        found.append(_episode(case_id, metric, current, closed_by=None))
    return found


def _episode(case_id: str, metric: Metric, state: dict, *, closed_by: BuildRef | None) -> Episode:
    return Episode(
        case_id,
        metric,
        state["last_good"],
        state["first_bad"],
        state["nights"],
        state["worst"],
        state["band"].median,
        closed_by,
        state["opened"],
    )


def _pct(value: float, reference: float) -> float:
    return 0.0 if reference == 0 else (value - reference) / abs(reference) * 100.0
