"""Regression episodes: one alert per stretch of moved nights, not one per night. Pure.

Walking one series (a case's metric, oldest night first), an episode **opens** at the first night that moved the
worse way against the baseline before it, by a *material* amount: beyond the band (``analysis.band``: median ±
(3 robust σ + threshold %)), and at least ``materiality_sigma`` robust σ and ``materiality_pct`` % from the median
(the profile's ``trend`` keys). While it is open the baseline is frozen (the nights before it), so a long
regression cannot become its own baseline; it **stays open** while later nights stay moved the same way, and
**closes** at the first night back inside the band. Only nights whose run passed (or warned) form a baseline: a
failed or crashed night (cancelled ones never reach the history) is no evidence of normal, and its value (a run
that broke) opens nothing, though it can keep an open episode open. The episode names the last good night before it
(the newest baseline night inside the band, never one that had itself regressed) and the first bad one, with their
builds' commits: the two revisions a bisect starts from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from afd_e2e.trend.analysis import MIN_HISTORY, Band, band
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

    @property
    def open(self) -> bool:
        return self.closed_by is None


@dataclass(frozen=True)
class Materiality:
    sigma: float  # robust standard deviations from the baseline's median
    pct: float  # % of the baseline's median


def _worse(metric: Metric, band_: Band, value: float) -> bool:
    direction = band_.direction(value)
    return direction < 0 if metric.higher_is_better else direction > 0


def _material(band_: Band, value: float, materiality: Materiality) -> bool:
    move = abs(value - band_.median)
    return move >= materiality.sigma * band_.spread and move >= materiality.pct / 100.0 * abs(band_.median)


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
            if _worse(metric, current["band"], night.value):
                current["nights"] += 1
                current["worst"] = max(current["worst"], _pct(night.value, current["band"].median), key=abs)
                continue
            found.append(_episode(case_id, metric, current, closed_by=night.build))
            current = None
        baseline = [n for n in nights[:position] if n.baseline][-window:]
        if not night.baseline or len(baseline) < MIN_HISTORY:
            continue
        before = band([n.value for n in baseline], threshold_pct)
        if _worse(metric, before, night.value) and _material(before, night.value, materiality):
            current = {
                "band": before,
                "last_good": _last_good(metric, before, baseline).build,
                "first_bad": night.build,
                "nights": 1,
                "worst": _pct(night.value, before.median),
            }
    if current is not None:
        found.append(_episode(case_id, metric, current, closed_by=None))
    return found


def _last_good(metric: Metric, before: Band, baseline: Sequence[Night]) -> Night:
    """The newest baseline night that did not move the worse way against the band: a baseline night may itself
    have regressed (too little history then to open an episode, or a short window), and a bisect from it would
    start between two regressed builds. One always exists: the band is centred on the baseline's own median."""
    return next(n for n in reversed(baseline) if not _worse(metric, before, n.value))


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
    )


def _pct(value: float, reference: float) -> float:
    return 0.0 if reference == 0 else (value - reference) / abs(reference) * 100.0
