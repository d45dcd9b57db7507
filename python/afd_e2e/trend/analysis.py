"""The regression call for one series (a case's metric over the history window, then tonight). Pure.

The rule is a **robust z-test of the last two or three nights against the nights before them**, the statistic a
performance engineer reads off a control chart (``moved``):

- the baseline (the nights before a candidate change) has a robust centre, the mean of its nights within ``CUT``
  MAD-σ of its median, and a robust spread, the biweight midvariance's standard deviation (nights beyond 9 MADs
  weigh nothing), so a past outlier neither moves the centre nor widens the spread; the centre is a mean, not the
  median, because its own error is shared by every recent night (the benchmark, at the same false alarms: +5% steps
  at 2% noise flagged within 3 nights 79.2% -> 80.8%, +10% at 4% noise 74.5% -> 75.8%, before the stricter spike
  checks below spent it on spikes);
- each recent night is standardised against it, ``(value - centre) / spread``, and winsorised at ``±WINSOR`` σ;
- the most extreme of the recent nights is left out and the rest, summed as a z-statistic (``sum / sqrt(k - 1)``),
  must lie beyond ``LIMITS[k]``; a baseline of n nights widens limit and cap by ``1 + SMALL / (n - 2)`` (its spread
  is only an estimate, as Student's t knows); every night lies on the same side of the centre, the first one at
  least ``WALK_BACK`` of the way to the others' level and at most ``FAR`` times as far (``belongs``), and the move
  (their median against the baseline's centre) is at least the profile's ``threshold_pct`` % of it (a practical
  floor: a real but tiny move is not called).

One night alone never makes a call, however far it lies: a single-night spike is not a change, and with the most
extreme night left out a spike never carries one. A spike more than ``FAR`` times as far as the nights after it does
not start one either: those nights, where they happen to look moved, make a change of their own, named from the
night after the spike. The change found in the last nights is walked back over the earlier nights that belong to
it (``belongs``); its first night is the build where it started. A move the worse way is a regression, the better
way an improvement; anything else is steady. The limits are calibrated by ``benchmarks/trend_detection.py`` (seeded
labelled series fed to ``call`` night by night): its figures are quoted in docs/guide.md.

Beside every call, ``detectable_pct``: the smallest step (% of the median) this rule flags within 3 nights, 4 times
in 5, at the history's noise (``detectable_step``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from afd_e2e.trend.record import BuildRef, Metric

MIN_HISTORY = 3  # fewer earlier values: too little history to call anything
MIN_BEFORE_CHANGE = 3  # a change-point needs this many nights before it
MIN_CHANGED_NIGHTS = 2  # ... and this many nights (tonight included) after it: one night is never a change
MAD_TO_SIGMA = 1.4826
BIWEIGHT_C = 9.0  # the biweight's tuning constant, in MADs
CUT = 4.0  # the centre is the mean of the nights within this many MAD-σ of the median
SPREAD_FLOOR = 0.001  # the spread is at least this fraction of |centre| (a constant history has none)
WINSOR = 4.0  # a night counts at most this many σ (widened with the limits)
# z of the mean of the last k nights but the most extreme (calibrated by the benchmark to 0.45% false alarms; the
# 2-night limit high: a spike and one outlier after it are two nights at 3-5 and 2-3 sigma)
LIMITS = {2: 2.37, 3: 1.64}
SMALL = 3.0  # a baseline of n nights widens the limits by (1 + SMALL / (n - 2)): its spread is only an estimate
CONSISTENT = 0.0  # every night of a change lies at least this many σ the same way (its side of the centre)
POWER_Z = 1.4051  # the normal quantile of 92%: outliers, the same-side and spike checks cost ~12%, 80% remain
DETECT_NIGHTS = 3
# a night just before a change belongs to it from this share of the way to its level: a start named a night early
# costs a bisect one more step, a night late makes it search between two bad builds
WALK_BACK = 0.25
# ... and up to this many times its level: a night beyond is a spike (5 sigma before nights at 2.5), not the change's
# first night; a spike named as a change's start opens an episode for one bad night (the benchmark, 800 spikes: 28
# named with no such check, 13 at twice, 11 at 1.75 with the 2-night limit at 2.37 (a spike and an outlier after it
# pass the 2-night check together); 1.6 named 12 and cost +10% steps at 4% noise 1.5% more)
FAR = 1.75
TRIMMED_MEAN, TRIMMED_SD = -0.8467, 1.2528  # the sum of the two smallest of three standard normals

REGRESSION = "regression"
IMPROVEMENT = "improvement"
STEADY = "steady"
NO_HISTORY = "too little history"
NO_VALUE = "no value tonight"


@dataclass(frozen=True)
class Band:
    """A baseline: its median, robust spread (a standard deviation) and centre (what nights are measured from)."""

    median: float
    spread: float
    nights: int  # in the baseline
    centre: float

    @property
    def scale(self) -> float:
        """The σ a night is measured in: the spread, at least ``SPREAD_FLOOR`` of the centre (a constant history)."""
        return max(self.spread, SPREAD_FLOOR * abs(self.centre))

    def sigmas(self, value: float) -> float:
        """``value`` in baseline σ from the centre."""
        if self.scale == 0:
            return 0.0 if value == self.centre else math.copysign(math.inf, value - self.centre)
        return (value - self.centre) / self.scale


def band(values: Sequence[float]) -> Band:
    """The median, the biweight midvariance's standard deviation (Tukey; 87% efficient at a normal, robust to
    outliers: nights beyond 9 MADs weigh nothing; the MAD's σ where that is undefined) and the centre, the mean of
    the nights within ``CUT`` MAD-σ of the median (nearly a mean's efficiency, where the median has 64%)."""
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    if mad == 0:
        return Band(median, 0.0, len(values), median)
    centre = statistics.fmean(v for v in values if abs(v - median) <= CUT * MAD_TO_SIGMA * mad)
    weights = [((v - median) / (BIWEIGHT_C * mad), v - median) for v in values]
    kept = [(u, d) for u, d in weights if abs(u) < 1.0]
    top = sum(d * d * (1 - u * u) ** 4 for u, d in kept)
    bottom = sum((1 - u * u) * (1 - 5 * u * u) for u, _ in kept)
    if bottom == 0:
        return Band(median, MAD_TO_SIGMA * mad, len(values), centre)
    return Band(median, math.sqrt(len(values) * top) / abs(bottom), len(values), centre)


def _widening(before: Band) -> float:
    """How much a baseline of few nights widens the limits: its spread is only an estimate (like Student's t)."""
    return 1.0 + SMALL / max(before.nights - 2, 1)


def z_limit(before: Band, nights: int) -> float:
    """The z that ``nights`` recent nights but the most extreme, summed as a z-statistic, must pass against
    ``before``: ``LIMITS`` widened for a baseline of few nights."""
    return LIMITS.get(nights, LIMITS[max(LIMITS)]) * _widening(before)


def edges(before: Band, nights: int) -> tuple[float, float]:
    """The values the mean of ``nights`` recent nights but the most extreme must lie beyond (below the first or above
    the second) for ``moved`` to see a move: the centre ∓ the limit in σ of that mean. What the trend plot draws."""
    reach = z_limit(before, nights) * before.scale / math.sqrt(nights - 1)
    return before.centre - reach, before.centre + reach


def moved(before: Band, nights: Sequence[float], threshold_pct: float = 0.0) -> int:
    """+1 when ``nights`` (two or more, the latest last) moved up against ``before``, -1 down, 0 when not."""
    if len(nights) < MIN_CHANGED_NIGHTS:
        return 0
    widening = _widening(before)
    cap = WINSOR * widening
    z = sorted(max(-cap, min(cap, before.sigmas(v))) for v in nights)
    limit = z_limit(before, len(z))
    up, down = z[:-1], z[1:]  # the most extreme night left out: one spike never carries a change
    direction = 1 if sum(up) / math.sqrt(len(up)) >= limit else -1 if sum(down) / math.sqrt(len(down)) <= -limit else 0
    if direction == 0 or min(direction * v for v in z) < CONSISTENT:
        return 0
    if not belongs(before, nights[0], nights[1:], direction):
        return 0  # the first night is noise beside a far later one: the change, if any, started after it
    move = abs(statistics.median(nights) - before.centre)
    return direction if move >= threshold_pct / 100.0 * abs(before.centre) else 0


def detectable_step(before: Band, threshold_pct: float = 0.0) -> float | None:
    """The smallest step (% of the median, positive) ``moved`` flags within 3 nights 4 times in 5 at this noise."""
    if before.centre == 0:
        return None
    limit = z_limit(before, DETECT_NIGHTS)
    # the sum of the two smallest of three nights at a step of d σ: 2d + TRIMMED_MEAN, standard deviation TRIMMED_SD
    sigmas = (limit * math.sqrt(DETECT_NIGHTS - 1) - TRIMMED_MEAN + POWER_Z * TRIMMED_SD) / (DETECT_NIGHTS - 1)
    return max(sigmas * before.scale / abs(before.centre) * 100.0, threshold_pct)


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
    detectable_pct: float | None = None  # the smallest step flagged within 3 nights (80%) at the history's noise
    # what tonight was judged against: the baseline before the change (regression, improvement), else the window
    baseline: Band | None = None


def belongs(
    before: Band, night: float, later: Sequence[float], direction: int, share: float = WALK_BACK, far: float = FAR
) -> bool:
    """Whether ``night`` lies at least ``share`` of the way from the baseline's centre to the level of ``later``, and
    no more than ``far`` times as far (a spike is no change's first night)."""
    level = statistics.median(direction * before.sigmas(v) for v in later)
    return share * level <= direction * before.sigmas(night) <= far * level


def change_point(values: Sequence[float], threshold_pct: float) -> tuple[int, Band, int] | None:
    """(index, baseline before it, direction) of the change the last 2 or 3 nights show, its start walked back
    over the earlier nights that belong to it (nearer the changed level than the baseline's centre)."""
    found = None
    for nights in range(MIN_CHANGED_NIGHTS, max(LIMITS) + 1):
        start = len(values) - nights
        if start < MIN_BEFORE_CHANGE:
            break
        before = band(values[:start])
        direction = moved(before, values[start:], threshold_pct)
        if direction:
            found = (start, before, direction)
            break
    if found is None:
        return None
    start, before, direction = found
    while start - 1 >= MIN_BEFORE_CHANGE:
        earlier = band(values[: start - 1])
        if not belongs(earlier, values[start - 1], values[start:], direction):
            break
        start, before = start - 1, earlier
    return start, before, direction


def call(
    case_id: str,
    metric: Metric,
    history: Sequence[tuple[BuildRef, float]],
    tonight: tuple[BuildRef, float | None],
    threshold_pct: float,
) -> Call:
    """The call for one series; ``history`` oldest first."""
    values = [value for _, value in history]
    whole = band(values) if values else None
    common = {
        "case_id": case_id,
        "metric": metric,
        "history": len(values),
        "median": whole.median if whole else None,
        "spread": whole.spread if whole else None,
        "tonight": tonight[1],
        "detectable_pct": detectable_step(whole, threshold_pct) if whole and len(values) >= MIN_HISTORY else None,
    }
    if tonight[1] is None:
        return Call(**common, status=NO_VALUE, change_pct=None, started=None, moved_nights=0)
    if len(values) < MIN_HISTORY or whole is None:
        return Call(**common, status=NO_HISTORY, change_pct=None, started=None, moved_nights=0)
    builds = [build for build, _ in history] + [tonight[0]]
    series = [*values, tonight[1]]
    found = change_point(series, threshold_pct)
    if found is None:
        return Call(
            **common,
            status=STEADY,
            change_pct=_pct(tonight[1], whole.median),
            started=None,
            moved_nights=0,
            baseline=whole,
        )
    start, before, direction = found
    worse = direction < 0 if metric.higher_is_better else direction > 0
    return Call(
        **common,
        baseline=before,
        status=REGRESSION if worse else IMPROVEMENT,
        change_pct=_pct(tonight[1], before.median),
        started=builds[start],
        moved_nights=len(series) - start,
    )


def _pct(value: float, reference: float) -> float | None:
    return None if reference == 0 else (value - reference) / abs(reference) * 100.0
