"""Tonight's results against the screened history: one ``Call`` per case and metric. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from afd_e2e.profile.model import TrendSpec
from afd_e2e.trend.analysis import REGRESSION, Call, call
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

    @property
    def regressions(self) -> list[Call]:
        return [c for c in self.calls if c.status == REGRESSION]

    @property
    def fails(self) -> bool:
        return bool(self.regressions) and self.spec.on_regression == "fail"


def _comparisons(results: Mapping[str, Any]) -> list[ComparisonSeries]:
    labels = {
        case.get("id"): case.get("label") or case.get("id") for case in (results.get("plan") or {}).get("cases") or []
    }
    return [
        ComparisonSeries(
            id=str(c.get("id")),
            baseline=str(c.get("baseline")),
            candidate=str(c.get("candidate")),
            baseline_label=str(labels.get(c.get("baseline"), c.get("baseline"))),
            candidate_label=str(labels.get(c.get("candidate"), c.get("candidate"))),
        )
        for c in (results.get("plan") or {}).get("comparisons") or []
    ]


def _case_order(results: Mapping[str, Any]) -> list[str]:
    planned = [str(case.get("id")) for case in (results.get("plan") or {}).get("cases") or []]
    return planned + [case_id for case_id in results.get("cases") or {} if case_id not in planned]


def compute_trend(
    results: Mapping[str, Any], tonight_build: BuildRef, fetched: list[Fetched], spec: TrendSpec, source: str
) -> TrendReport:
    tonight = run_point(results, tonight_build)
    earlier = [f for f in fetched if tonight_build.number is None or f.build.number != tonight_build.number]
    screened = screen(earlier, identity(results), spec.window)
    calls = []
    for case_id in _case_order(results):
        for key in METRICS:
            history = [(p.build, p.values[(case_id, key)]) for p in screened.points if (case_id, key) in p.values]
            value = tonight.values.get((case_id, key))
            if value is None and not history:
                continue
            calls.append(call(case_id, metric(key), history, (tonight_build, value), spec.threshold_pct))
    return TrendReport(
        profile=str(results.get("profile")),
        identity=tonight.identity,
        source=source,
        spec=spec,
        tonight=tonight,
        history=screened.points,
        calls=calls,
        skipped=screened.skipped,
        comparisons=_comparisons(results),
    )
