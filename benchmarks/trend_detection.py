"""How well the trend's change-point rule sees a regression: seeded labelled series fed to ``analysis.call`` online,
night by night (tonight against the window of nights before it, as ``afd-e2e trend`` does), the shipped rule, the
band-per-night rule it replaced and two bounds side by side, in the same invocation.

    PYTHONPATH=python python benchmarks/trend_detection.py [--series 400] [--seed 41]

Every series: 40 nights of a metric around 100 (lower is better, a latency), night-to-night noise of a given CV,
4% of nights an outlier at 3x the noise; the call is judged from night 20 on (a nightly with 20 nights of history
already), with a window of 30 earlier nights. Cells: noise CV 1, 2, 4% x a step of +-3, +-5, +-10% at a random night
20-34; a slow drift (+5% over 10 nights, flagged within 12 nights of its start); a single-night spike of 3-5 sigma at
a random night 20-34, the rest steady. Columns: false alarms per series-night (the nights a regression call rises,
one alert per stretch of flagged nights, before the step or anywhere without one), the share of steps flagged the
right way (a step down of a latency is an improvement) within 3 nights of the step (the step night and the two after
it), the median delay in nights (0: flagged on the step night; among the steps flagged by night 39). Spike rows: the
series in which a change is named as starting on the spike's night. Then, per noise, the detectable step the calls
state against the share of steps of that size flagged.

Two bounds beside the rule, each with its limit calibrated here, on the no-change series, to issue 41's 0.5% false
alarms per series-night. The learned-noise, spike-safe bound (``learned_noise``) is an online rule like the shipped
one and bound by what binds it: it learns the median and noise from the window's earlier nights (with the most
efficient estimates found for this noise) and leaves the most extreme of the last nights out (so one night never
carries a change, issue 41's own spike target), but skips the rule's other checks. Where even it flags fewer steps
than a target asks, no rule that learns its noise and is spike-safe reaches the target at that false-alarm rate, and
the benchmark says so instead of counting it against the rule. The known-noise bound (``known_noise``) knows what no
rule can, the true median and noise, and tests the mean of the last 3 nights: what a history long enough to know the
noise would buy. Issue 41's targets are checked at the end; exit 1 only when one the learned-noise bound reaches is
missed.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from afd_e2e.profile import TrendSpec
from afd_e2e.trend.analysis import IMPROVEMENT, REGRESSION, call
from afd_e2e.trend.record import BuildRef, metric

NIGHTS = 40
WINDOW = 30
FIRST_JUDGED = 20
STEP_NIGHTS = (20, 34)
OUTLIER_SHARE = 0.04
OUTLIER_SCALE = 3.0
WITHIN = 3
LATENCY = metric("mean_ttft_ms")  # lower is better: +x% is a regression
BUILDS = [BuildRef(f"#{i}", i) for i in range(NIGHTS)]
FALSE_ALARMS = 0.005  # issue 41's budget of false regressions per series-night
BOUND_CAP = 3.0  # the bound counts a night at most this many true σ (the outliers' share is known to it)
CALIBRATION_STEPS = 24  # bisection steps of a bound's limit (z to ~3e-7)
MAD_TO_SIGMA = 1.4826
LEARNED_CUT = 4.0  # the learned-noise bound estimates from the nights within this many MAD-σ of the median
TWO_NIGHT_RATIO = 1.3  # its 2-night statistic counts against a limit this much higher (200 series: flags the most of 1, 1.15, 1.3, none)

# (flag, started): +1 flagged up, -1 down, 0 not; the night the change was named as starting (None: not flagged)
Rule = Callable[[Sequence[float], float], tuple[int, int | None]]
# a bound's statistic tonight: (up, down), each a z that its limit, calibrated on the null series, must reach
Score = Callable[[Sequence[float], int], tuple[float, float]]


@dataclass(frozen=True)
class Series:
    values: list[float]
    change: int | None  # the first changed night (step, drift start or spike), None: none
    sign: int  # +1 up, -1 down, 0 none
    outliers: frozenset[int] = frozenset()  # the nights drawn at OUTLIER_SCALE x the noise


def make_series(rng: random.Random, cv_pct: float, shape: str, size_pct: float) -> Series:
    """One labelled series: ``shape`` is none | step | drift | spike; ``size_pct`` the step or drift (signed, %),
    or the spike in sigma."""
    noise, outliers = [], set()
    for night in range(NIGHTS):
        scale = OUTLIER_SCALE if rng.random() < OUTLIER_SHARE else 1.0
        noise.append(rng.gauss(0.0, cv_pct / 100.0 * scale))
        if scale != 1.0:
            outliers.add(night)
    values = [100.0 * (1.0 + e) for e in noise]
    if shape == "none":
        return Series(values, None, 0, frozenset(outliers))
    at = rng.randint(*STEP_NIGHTS) if shape != "drift" else rng.randint(20, 25)
    sign = 0 if shape == "spike" else 1 if size_pct > 0 else -1
    for night in range(at, NIGHTS):
        if shape == "step":
            values[night] *= 1.0 + size_pct / 100.0
        elif shape == "drift":
            values[night] *= 1.0 + size_pct / 100.0 * min(1.0, (night - at + 1) / 10.0)
    if shape == "spike":
        values[at] = 100.0 * (1.0 + size_pct * cv_pct / 100.0)
    return Series(values, at, sign, frozenset(outliers))


def known_noise(cv_pct: float) -> Score:
    """The known-noise bound's statistic: the mean of tonight's last 3 nights against the series' true median (100)
    and true noise (each night capped at ``BOUND_CAP`` of its σ, the outliers' share known too), as a z. No real rule
    knows these; calibrated to the same false alarms, its share flagged is what the noise leaves to any rule that
    looks at the nights since a step, however long its history. Of the known-noise statistics tried it flags the
    most (400 series: +5% at CV 2%: 92%; the same mean uncapped 89%; any of the means of the last 1, 2 or 3 nights
    beyond one limit 78%: the shorter means need a higher limit for the same false alarms)."""

    def score(values: Sequence[float], night: int) -> tuple[float, float]:
        z = [max(-BOUND_CAP, min(BOUND_CAP, (v / 100.0 - 1.0) * 100.0 / cv_pct)) for v in values[night - 2 : night + 1]]
        mean = sum(z) / math.sqrt(len(z))
        return mean, -mean

    return score


def centre_and_spread(values: Sequence[float]) -> tuple[float, float]:
    """The learned-noise bound's estimates of a baseline: the mean and standard deviation of the nights within
    ``LEARNED_CUT`` MAD-σ of the median. At this noise (normal, 4% of nights at 3x) they beat a median centre (200
    series, +5% at CV 2%: 88% flagged against 79.5% from the median and MAD, 82% from the median and biweight; the
    same mean with the biweight, the rule's estimates, 88%): the median's own error, shared by every recent night,
    costs more than the outliers the cut leaves in."""
    median = statistics.median(values)
    mad = MAD_TO_SIGMA * statistics.median(abs(v - median) for v in values)
    kept = [v for v in values if abs(v - median) <= LEARNED_CUT * mad] if mad > 0 else list(values)
    return statistics.fmean(kept), statistics.stdev(kept) if len(kept) > 1 else 0.0


def _learned_z(values: Sequence[float], night: int, nights: int) -> tuple[float, float]:
    """The last ``nights`` nights but the most extreme, summed as a z against the nights before them (within the
    window), the other way for a move down; each night capped at ``BOUND_CAP`` estimated σ, the sum scaled by the
    centre's own error (shared by every recent night: a baseline of n nights, ``1 + (nights - 1) / n``)."""
    baseline = values[max(0, night - WINDOW) : night - nights + 1]
    centre, spread = centre_and_spread(baseline)
    z = sorted(
        max(-BOUND_CAP, min(BOUND_CAP, (v - centre) / spread if spread > 0 else 0.0))
        for v in values[night - nights + 1 : night + 1]
    )
    scale = math.sqrt(nights - 1) * math.sqrt(1.0 + (nights - 1) / len(baseline))
    return sum(z[:-1]) / scale, -sum(z[1:]) / scale


def learned_noise(values: Sequence[float], night: int) -> tuple[float, float]:
    """The learned-noise, spike-safe bound's statistic: online like the rule (the median and noise learned from the
    window's earlier nights, the step night unknown), spike-safe like it (the most extreme of the last nights left
    out, so one night never carries a change), but with the most efficient estimates found for this noise
    (``centre_and_spread``) and none of the rule's other checks (same side, first night, materiality). The larger
    of the 3-night statistic and the 2-night one over ``TWO_NIGHT_RATIO`` (which sees a step one night earlier)."""
    up3, down3 = _learned_z(values, night, 3)
    up2, down2 = _learned_z(values, night, 2)
    return max(up3, up2 / TWO_NIGHT_RATIO), max(down3, down2 / TWO_NIGHT_RATIO)


def bound_rule(score: Score, limit: float) -> Rule:
    """A bound as a rule: +1 where its statistic up lies beyond ``limit``, -1 down. It names no start: it is not
    judged on spikes."""

    def judge(values: Sequence[float], night: int) -> tuple[int, int | None]:
        up, down = score(values, night)
        return (1, None) if up >= limit else (-1, None) if down >= limit else (0, None)

    return judge


def calibrate(null: Sequence[tuple[Score, Series]], rate: float = FALSE_ALARMS) -> float:
    """The smallest limit at which a bound raises at most ``rate`` false alarms per series-night on the null series
    (each with its bound's statistic, every noise pooled: the statistics are scale-free), counted as ``run_cell``
    counts them: the nights a regression call rises."""
    scores = [[score(s.values, night) for night in range(FIRST_JUDGED, NIGHTS)] for score, s in null]
    judged = sum(len(nights) for nights in scores)

    def alarms(limit: float) -> float:
        found = 0
        for nights in scores:
            previous = 0
            for up, down in nights:
                flag = 1 if up >= limit else -1 if down >= limit else 0
                found += flag == 1 and previous != 1
                previous = flag
        return found / judged

    low, high = 1.0, 6.0
    for _ in range(CALIBRATION_STEPS):
        middle = (low + high) / 2.0
        low, high = (low, middle) if alarms(middle) <= rate else (middle, high)
    return high


def new_rule(threshold_pct: float) -> Rule:
    def judge(values: Sequence[float], night: int) -> tuple[int, int | None]:
        history = [(BUILDS[i], values[i]) for i in range(max(0, night - WINDOW), night)]
        result = call("bench", LATENCY, history, (BUILDS[night], values[night]), threshold_pct)
        return _flag(result.status, result.started)

    return judge


def _flag(status: str, started: BuildRef | None) -> tuple[int, int | None]:
    if status == REGRESSION:
        return 1, started.number if started else None
    if status == IMPROVEMENT:
        return -1, started.number if started else None
    return 0, None


def old_rule(threshold_pct: float) -> Rule:
    """The band-per-night rule this benchmark replaced (kept here only, as the baseline)."""

    def band(values: Sequence[float]) -> tuple[float, float]:
        median = statistics.median(values)
        spread = 1.4826 * statistics.median(abs(v - median) for v in values)
        return median, 3.0 * spread + threshold_pct / 100.0 * abs(median)

    def direction(b: tuple[float, float], value: float) -> int:
        return 0 if abs(value - b[0]) <= b[1] else (1 if value > b[0] else -1)

    def judge(values: Sequence[float], night: int) -> tuple[int, int | None]:
        series = list(values[max(0, night - WINDOW) : night + 1])
        first = max(0, night - WINDOW)
        for start in range(3, len(series) - 1):
            before = band(series[:start])
            found = {direction(before, v) for v in series[start:]}
            if len(found) == 1 and 0 not in found:
                return found.pop(), first + start
        moved = direction(band(series[:-1]), series[-1])
        return (moved, night) if moved else (0, None)

    return judge


@dataclass
class Cell:
    alarms: int = 0
    judged: int = 0
    flagged: int = 0
    series: int = 0
    delays: list[int] | None = None
    spike_opened: int = 0
    spike_and_outlier: int = 0  # of those, spikes with an outlier drawn between them and the call: two bad nights

    def add_delay(self, delay: int) -> None:
        self.delays = [*(self.delays or []), delay]


def run_cell(rule: Rule, series: list[Series], within: int = WITHIN) -> Cell:
    cell = Cell()
    for s in series:
        cell.series += 1
        first_flag, previous = None, 0
        for night in range(FIRST_JUDGED, NIGHTS):
            flag, started = rule(s.values, night)
            onset, previous = flag if flag != previous else 0, flag  # one alert per stretch of flagged nights
            before_change = s.change is None or night < s.change or s.sign == 0
            if s.sign == 0 and s.change is not None:  # a spike: a change named as starting on it
                if flag and started == s.change:
                    cell.spike_opened += 1
                    cell.spike_and_outlier += any(s.change < n <= night for n in s.outliers)
                    break
                before_change = True
            if before_change:
                cell.judged += 1
                cell.alarms += onset == 1  # a regression called (the metric is a latency)
            elif flag == s.sign and first_flag is None:
                first_flag = night
        if s.sign and first_flag is not None:
            cell.add_delay(first_flag - s.change)
            cell.flagged += first_flag - s.change < within
    return cell


def cells(rng: random.Random, count: int) -> list[tuple[str, float, str, float, list[Series]]]:
    found = []
    for cv in (1.0, 2.0, 4.0):
        found.append(
            (f"CV {cv:g}% no change", cv, "none", 0.0, [make_series(rng, cv, "none", 0) for _ in range(count)])
        )
        for step in (3.0, 5.0, 10.0, -3.0, -5.0, -10.0):
            made = [make_series(rng, cv, "step", step) for _ in range(count)]
            found.append((f"CV {cv:g}% step {step:+g}%", cv, "step", step, made))
    for cv in (1.0, 2.0, 4.0):
        made = [make_series(rng, cv, "drift", 5.0) for _ in range(count)]
        found.append((f"CV {cv:g}% drift +5%/10 nights", cv, "drift", 5.0, made))
    for cv in (2.0, 4.0):
        made = [make_series(rng, cv, "spike", rng.uniform(3.0, 5.0)) for _ in range(count)]
        found.append((f"CV {cv:g}% spike 3-5 sigma", cv, "spike", 0.0, made))
    return found


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "–"


def _delay(cell: Cell) -> str:
    return f"{statistics.median(cell.delays):g}" if cell.delays else "–"


RULES = ("new", "old", "learned", "known")  # the rule, the band rule it replaced, the learned- and known-noise bounds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=400, help="series per cell")
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--old-threshold-pct", type=float, default=5.0, help="the old rule's threshold_pct")
    args = parser.parse_args()

    table = cells(random.Random(args.seed), args.series)
    null = [(cv, s) for _name, cv, shape, _size, made in table if shape == "none" for s in made]
    known = calibrate([(known_noise(cv), s) for cv, s in null])
    learned = calibrate([(learned_noise, s) for _cv, s in null])
    print(
        f"{args.series} seeded series per cell, {NIGHTS} nights, window {WINDOW}, judged from night {FIRST_JUDGED}; "
        f"new rule at threshold_pct {TrendSpec.threshold_pct:g}, old band rule at threshold_pct "
        f"{args.old_threshold_pct:g}; limits calibrated here to {100 * FALSE_ALARMS:g}% false alarms:\n"
        f"  learned-noise bound: the last 3 nights but the most extreme (or the last 2 nights' lesser at "
        f"{TWO_NIGHT_RATIO:g}x the limit) against the mean and SD of the earlier nights within {LEARNED_CUT:g} MAD-sigma "
        f"of their median, each capped at {BOUND_CAP:g} sigma, beyond z {learned:.2f}\n"
        f"  known-noise bound: the mean of the last 3 nights (each capped at {BOUND_CAP:g} sigma) against the true "
        f"median and sigma beyond z {known:.2f}"
    )
    print(f"{'':32}" + "".join(f"{title:^36}" for title in _COLS))
    print(f"{'cell':32}" + "".join(f"{name:>9}" for _ in _COLS for name in RULES))
    results: dict[str, dict[str, Cell]] = {}
    for name, cv, shape, _size, made in table:
        rules = {
            "new": new_rule(TrendSpec.threshold_pct),
            "old": old_rule(args.old_threshold_pct),
            "learned": bound_rule(learned_noise, learned),
            "known": bound_rule(known_noise(cv), known),
        }
        row = {n: run_cell(rule, made, within=12 if shape == "drift" else WITHIN) for n, rule in rules.items()}
        results[name] = row
        alarms = "".join(f"{_pct(c.alarms, c.judged):>9}" for c in row.values())
        if shape == "none":
            hits = "".join(f"{'–':>9}" for _ in row)
        elif shape == "spike":
            hits = "".join(f"{'–' if n in BOUNDS else f'{c.spike_opened} open':>9}" for n, c in row.items())
        else:
            hits = "".join(f"{_pct(c.flagged, c.series):>9}" for c in row.values())
        print(f"{name:32}{alarms}{hits}" + "".join(f"{_delay(c):>9}" for c in row.values()))
    _detectable(random.Random(args.seed + 1), args.series)
    return _check(results)


def _detectable(rng: random.Random, count: int) -> None:
    """The detectable step each call states, against the share of steps of that size flagged within 3 nights."""
    for cv in (1.0, 2.0, 4.0):
        steady = [make_series(rng, cv, "none", 0.0) for _ in range(count)]
        stated = statistics.median(
            call(
                "bench", LATENCY, [(BUILDS[i], s.values[i]) for i in range(27)], (BUILDS[27], 100.0), 1.0
            ).detectable_pct
            or 0.0
            for s in steady
        )
        cell = run_cell(new_rule(TrendSpec.threshold_pct), [make_series(rng, cv, "step", stated) for _ in range(count)])
        print(
            f"CV {cv:g}%: detectable step stated (median, 27 nights of history) +{stated:.1f}%; "
            f"steps of that size flagged within 3 nights: {_pct(cell.flagged, cell.series)} (meant: 80%)"
        )


_COLS = ("false alarms", "flagged within 3 nights", "median delay")
BOUNDS = ("learned", "known")


def _check(results: dict[str, dict[str, Cell]]) -> int:
    """Issue 41's targets. A share flagged is the rule's to meet only where the learned-noise bound meets it: where
    even that bound, online and spike-safe like the rule but with the best estimates and no other check, falls short
    at the same false alarms, no rule that learns its noise from the window and never lets one night carry a change
    reaches it, and the benchmark says so instead of counting it against the rule (the known-noise bound beside it
    says what a longer history would buy). False alarms are pooled over the CV 2% cells (a rate per series-night;
    the largest of seven cells' noisy estimates would fail even a bound calibrated to it). The bounds name no start,
    so no spike opens an episode of theirs: spikes are the rule's to keep out."""

    def share(name: str, rule: str) -> float:
        return results[name][rule].flagged / results[name][rule].series

    def alarms(rule: str) -> float:
        found = [row[rule] for n, row in results.items() if n.startswith("CV 2%") and "spike" not in n]
        return sum(c.alarms for c in found) / sum(c.judged for c in found)

    missed = 0
    for cv, step, goal in ((2.0, 5.0, 0.90), (2.0, 3.0, 0.50), (4.0, 10.0, 0.90)):
        cell, what = f"CV {cv:g}% step {step:+g}%", f"{step:+g}% at CV {cv:g}%"
        rule, learned, known = (share(cell, n) for n in ("new", "learned", "known"))
        noise = 2.0 * math.sqrt(learned * (1.0 - learned) / results[cell]["learned"].series)  # two standard errors
        figures = (
            f"the rule {100 * rule:.1f}%, the learned-noise bound {100 * learned:.1f}% (±{100 * noise:.1f}% at 2 "
            f"standard errors), the known-noise bound {100 * known:.1f}%"
        )
        if learned < goal:
            print(
                f"out of reach  {what} flagged within 3 nights >= {100 * goal:g}%: no rule that learns its noise "
                f"from the window and is spike-safe reaches it at {100 * FALSE_ALARMS:g}% false alarms: {figures}"
            )
            continue
        missed += rule < goal
        print(
            f"{'met   ' if rule >= goal else 'MISSED'}        {what} flagged within 3 nights >= {100 * goal:g}%: {figures}"
        )
    rate = alarms("new")
    missed += rate > FALSE_ALARMS
    print(
        f"{'met   ' if rate <= FALSE_ALARMS else 'MISSED'}        CV 2%: <= {100 * FALSE_ALARMS:g}% false alarms per "
        f"series-night: the rule {100 * rate:.2f}% (pooled over the CV 2% cells), the learned-noise bound "
        f"{100 * alarms('learned'):.2f}%, the known-noise bound {100 * alarms('known'):.2f}%"
    )
    spikes = [row["new"] for n, row in results.items() if "spike" in n]
    opened = sum(c.spike_opened for c in spikes)
    missed += opened > 0
    print(
        f"{'met   ' if opened == 0 else 'MISSED'}        no spike opens an episode: {opened} of "
        f"{sum(c.series for c in spikes)} opened, {sum(c.spike_and_outlier for c in spikes)} of them with an outlier "
        "drawn between the spike and the call"
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
