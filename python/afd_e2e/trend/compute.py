"""Tonight's results against the screened history: one ``Call`` per case and metric. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from afd_e2e.profile.model import TrendSpec
from afd_e2e.results import RunResults
from afd_e2e.trend.analysis import IMPROVEMENT, MIN_HISTORY, REGRESSION, STEADY, Call, call
from afd_e2e.trend.episodes import Episode, Materiality, Night, episodes
from afd_e2e.trend.history import Fetched, Skipped, screen
from afd_e2e.trend.record import METRICS, BuildRef, Identity, RunPoint, identity, metric, run_point


@dataclass(frozen=True)
class ComparisonSeries:
    """A comparison of tonight's plan, whose two cases are drawn together in one trend plot."""

    id: str
    baseline: str
    candidate: str
    baseline_label: str
    candidate_label: str


@dataclass(frozen=True)
class TrendReport:
    profile: str
    identity: Identity
    source: str  # where the history came from, in words
    spec: TrendSpec
    tonight: RunPoint
    history: list[RunPoint]  # compared runs, oldest first
    calls: list[Call]
    skipped: list[Skipped]
    comparisons: list[ComparisonSeries]
    episodes: list[Episode] = field(default_factory=list)  # every regression episode of the window, oldest first
    nothing_judged: str | None = None  # why no series was judged, when none was: "no regression" would be untrue

    @property
    def open_episodes(self) -> list[Episode]:
        """The episodes still open tonight: one alert each, however many nights they last."""
        return [e for e in self.episodes if e.open]

    @property
    def opened_tonight(self) -> list[Episode]:
        """Open episodes the rule opened tonight (their first bad night is a night or two before, the first of the
        nights that moved): what a bisect step is offered for."""
        return [e for e in self.open_episodes if (e.opened or e.first_bad) == self.tonight.build]

    @property
    def regressions(self) -> list[Call]:
        return [c for c in self.calls if c.status == REGRESSION]

    @property
    def fails(self) -> bool:
        return bool(self.regressions) and self.spec.on_regression == "fail"


def _comparisons(results: RunResults) -> list[ComparisonSeries]:
    labels = {case.id: case.label for case in results.plan.cases}
    return [
        ComparisonSeries(
            id=c.id,
            baseline=c.baseline,
            candidate=c.candidate,
            baseline_label=labels.get(c.baseline, c.baseline),
            candidate_label=labels.get(c.candidate, c.candidate),
        )
        for c in results.plan.comparisons
    ]


def _case_order(results: RunResults) -> list[str]:
    planned = [case.id for case in results.plan.cases]
    return planned + [case_id for case_id in results.cases if case_id not in planned]


def _why_nothing_judged(results: RunResults, tonight: RunPoint, history: list[RunPoint], skipped: int) -> str:
    """The reason in words: tonight measured nothing (a crash), nothing earlier is comparable, or too little is."""
    if not tonight.values:
        return f"tonight's run recorded no value (status {results.status})"
    if not history:
        return "no earlier run is comparable with tonight" + (f" ({skipped} skipped)" if skipped else "")
    return f"no metric of tonight has the {MIN_HISTORY} comparable earlier values a call needs"


def compute_trend(
    results: RunResults, tonight_build: BuildRef, fetched: list[Fetched], spec: TrendSpec, source: str
) -> TrendReport:
    tonight = run_point(results, tonight_build)
    earlier = [f for f in fetched if tonight_build.number is None or f.build.number != tonight_build.number]
    screened = screen(earlier, identity(results), spec.window, results.run_id)
    calls, found = [], []
    materiality = Materiality(spec.materiality_sigma, spec.materiality_pct)
    for case_id in _case_order(results):
        for key in METRICS:
            history = [(p.build, p.values[(case_id, key)]) for p in screened.points if (case_id, key) in p.values]
            value = tonight.values.get((case_id, key))
            if value is None and not history:
                continue
            calls.append(call(case_id, metric(key), history, (tonight_build, value), spec.threshold_pct))
            points = [*screened.points, tonight]
            nights = [
                Night(p.build, p.values[(case_id, key)], p.baseline) for p in points if (case_id, key) in p.values
            ]
            found += episodes(
                case_id,
                metric(key),
                nights,
                threshold_pct=spec.threshold_pct,
                materiality=materiality,
                window=spec.window,
            )
    judged = any(c.status in (REGRESSION, IMPROVEMENT, STEADY) for c in calls)
    return TrendReport(
        profile=results.profile,
        identity=tonight.identity,
        source=source,
        spec=spec,
        tonight=tonight,
        history=screened.points,
        calls=calls,
        skipped=screened.skipped,
        comparisons=_comparisons(results),
        episodes=found,
        nothing_judged=None
        if judged
        else _why_nothing_judged(results, tonight, screened.points, len(screened.skipped)),
    )
