"""How well the trend's change-point rule sees a regression: seeded labelled series fed to ``analysis.call`` online,
night by night (tonight against the window of nights before it, as ``afd-e2e trend`` does), the shipped rule and the
band-per-night rule it replaced side by side, in the same invocation.

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
state against the share of steps of that size flagged. Issue 41's targets are checked at the end; exit 1 when one
is missed.
"""

from __future__ import annotations

import argparse
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

# (flag, started): +1 flagged up, -1 down, 0 not; the night the change was named as starting (None: not flagged)
Rule = Callable[[Sequence[float], float], tuple[int, int | None]]


@dataclass(frozen=True)
class Series:
    values: list[float]
    change: int | None  # the first changed night (step, drift start or spike), None: none
    sign: int  # +1 up, -1 down, 0 none


def make_series(rng: random.Random, cv_pct: float, shape: str, size_pct: float) -> Series:
    """One labelled series: ``shape`` is none | step | drift | spike; ``size_pct`` the step or drift (signed, %),
    or the spike in sigma."""
    noise = []
    for _ in range(NIGHTS):
        scale = OUTLIER_SCALE if rng.random() < OUTLIER_SHARE else 1.0
        noise.append(rng.gauss(0.0, cv_pct / 100.0 * scale))
    values = [100.0 * (1.0 + e) for e in noise]
    if shape == "none":
        return Series(values, None, 0)
    at = rng.randint(*STEP_NIGHTS) if shape != "drift" else rng.randint(20, 25)
    sign = 0 if shape == "spike" else 1 if size_pct > 0 else -1
    for night in range(at, NIGHTS):
        if shape == "step":
            values[night] *= 1.0 + size_pct / 100.0
        elif shape == "drift":
            values[night] *= 1.0 + size_pct / 100.0 * min(1.0, (night - at + 1) / 10.0)
    if shape == "spike":
        values[at] = 100.0 * (1.0 + size_pct * cv_pct / 100.0)
    return Series(values, at, sign)


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=400, help="series per cell")
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--old-threshold-pct", type=float, default=5.0, help="the old rule's threshold_pct")
    args = parser.parse_args()

    rules = {"old band rule": old_rule(args.old_threshold_pct), "robust z-test": new_rule(TrendSpec.threshold_pct)}
    table = cells(random.Random(args.seed), args.series)
    print(
        f"{args.series} seeded series per cell, {NIGHTS} nights, window {WINDOW}, judged from night {FIRST_JUDGED}; "
        f"old rule at threshold_pct {args.old_threshold_pct:g}, new rule at threshold_pct {TrendSpec.threshold_pct:g}"
    )
    header = f"{'cell':32}" + "".join(f"{name + ' ' + col:>22}" for name in ("old", "new") for col in _COLS)
    print(header)
    results: dict[str, Cell] = {}
    for name, _cv, shape, _size, made in table:
        row = {
            rule_name: run_cell(rule, made, within=12 if shape == "drift" else WITHIN)
            for rule_name, rule in rules.items()
        }
        results[name] = row["robust z-test"]
        text = f"{name:32}"
        for cell in row.values():
            hit = _pct(cell.flagged, cell.series) if shape in ("step", "drift") else f"{cell.spike_opened} opened"
            if shape == "none":
                hit = "–"
            text += f"{_pct(cell.alarms, cell.judged):>22}{hit:>22}{_delay(cell):>22}"
        print(text)
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


_COLS = ("false alarms", "flagged <=3", "delay")


def _check(results: dict[str, Cell]) -> int:
    def share(name: str) -> float:
        return results[name].flagged / results[name].series

    cv2_alarms = max(
        results[n].alarms / results[n].judged for n in results if n.startswith("CV 2%") and "spike" not in n
    )
    targets = [
        ("CV 2%: +5% flagged within 3 nights >= 90%", share("CV 2% step +5%") >= 0.90),
        ("CV 2%: +3% flagged within 3 nights >= 50%", share("CV 2% step +3%") >= 0.50),
        ("CV 2%: <= 0.5% false alarms per series-night", cv2_alarms <= 0.005),
        ("CV 4%: +10% flagged within 3 nights >= 90%", share("CV 4% step +10%") >= 0.90),
        ("no spike opens an episode", all(c.spike_opened == 0 for n, c in results.items() if "spike" in n)),
    ]
    for text, met in targets:
        print(f"{'met   ' if met else 'MISSED'} {text}")
    return 0 if all(met for _, met in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
