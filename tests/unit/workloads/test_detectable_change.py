"""Unit tier: what a comparison could have seen. Beside every metric, the smallest change its repetitions would call
different with 80% power at the observed noise (never under the threshold); where a profile asks to see a change
(``detect_pct``) and the repetitions cannot, the metric fails saying how many repetitions would (issue 41, part 3).
The power is checked by a seeded simulation of the verdict itself, not by re-deriving the formula."""

from __future__ import annotations

import copy
import random
from dataclasses import replace

import pytest
import yaml

from afd_e2e.errors import UsageError
from afd_e2e.profile.bench_spec import DEFAULT_BENCH_METRICS, MetricGate, bench_spec
from afd_e2e.profile.section_readers import parse_profile
from afd_e2e.report.annotation import render_annotation
from afd_e2e.report.junit import build_testcases
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.results.status import Status, Verdict
from afd_e2e.workloads import stats
from afd_e2e.workloads.performance_comparison import compare_case_performance
from repo_paths import REPO
from results_docs import load_fixture, typed

SEED = typed(load_fixture("seed"))


def _worse_share(delta_pct: float, n: int, cv_pct: float, trials: int, seed: int) -> float:
    """How often ``n`` repetitions a side of a metric with noise ``cv_pct`` (lower is better) are judged worse when
    the candidate is truly ``delta_pct`` slower."""
    rng = random.Random(seed)
    worse = 0
    for _ in range(trials):
        base = [rng.gauss(100.0, cv_pct) for _ in range(n)]
        cand = [rng.gauss(100.0 + delta_pct, cv_pct) for _ in range(n)]
        found = stats.quick_verdict(
            stats.Summary.of(base),
            stats.Summary.of(cand),
            threshold_pct=2.0,
            margin_pct=5.0,
            higher_is_better=False,
            looks=1,
        )
        worse += found is Verdict.WORSE
    return worse / trials


@pytest.mark.parametrize(("n", "cv_pct"), [(5, 3.0), (10, 4.0)])
def test_the_detectable_change_is_called_worse_about_80_percent_of_the_time(n, cv_pct):
    truth = stats.Summary(100.0, cv_pct, n)
    detectable = stats.detectable_pct(truth, truth, threshold_pct=2.0)
    assert detectable is not None and detectable > 2.0  # above the threshold: the noise, not the threshold, binds
    assert 0.72 <= _worse_share(detectable, n, cv_pct, trials=1500, seed=n) <= 0.88
    assert _worse_share(detectable / 2, n, cv_pct, trials=1500, seed=n + 1) < 0.4  # half of it is mostly missed


def test_never_under_the_threshold_and_nothing_below_two_repetitions():
    quiet = stats.Summary(100.0, 0.01, 10)
    assert stats.detectable_pct(quiet, quiet, threshold_pct=2.0) == 2.0
    assert stats.detectable_pct(stats.Summary(100.0, 1.0, 1), quiet, threshold_pct=2.0) is None


def test_repetitions_to_detect_are_the_fewest_that_reach_the_ask():
    base, cand = stats.Summary(100.0, 3.6, 5), stats.Summary(108.0, 1.5, 5)  # the seed's TTFT noise
    n = stats.repetitions_to_detect(base, cand, 4.0, threshold_pct=2.0)
    assert n is not None and n > 5

    def reach(k: int) -> float:
        return stats.detectable_pct(replace(base, n=k), replace(cand, n=k), threshold_pct=2.0)

    assert reach(n) <= 4.0 < reach(n - 1)
    assert stats.repetitions_to_detect(base, cand, 1.0, threshold_pct=2.0) is None  # under the threshold: never


def _seed_with_detect(detect_pct: float):
    gates = tuple(
        MetricGate(m, "warn", 5.0, detect_pct=detect_pct if m.key == "mean_ttft_ms" else None)
        for m in DEFAULT_BENCH_METRICS
    )
    native, afd = (copy.deepcopy(SEED.cases[c].section(PERFORMANCE)) for c in ("native-eager-dp8", "afd-eager-4a4f"))
    return compare_case_performance("native", native, "afd", afd, threshold_pct=2.0, control=False, metrics=gates)


def test_a_metric_that_cannot_see_the_asked_change_fails_saying_how_many_repetitions_would():
    result = _seed_with_detect(4.0)  # the seed's TTFT (CV 3.6%, 5+5) can see ±6.0%
    ttft = next(m for m in result.metrics if m.key == "mean_ttft_ms")
    assert ttft.detectable_pct == pytest.approx(6.03, abs=0.01) and ttft.undetectable
    assert result.status is Status.FAILED
    assert f"TTFT can see ±6.0%, wider than the asked ±4% (detect_pct): about {ttft.detect_repetitions}" in (
        result.failure
    )
    assert all(m.detectable_pct is not None for m in result.metrics)  # every metric carries it
    assert not _seed_with_detect(10.0).failure  # ±6.0% is within an ask of ±10%


def test_the_reports_show_it_and_the_testcase_fails():
    results = copy.deepcopy(SEED)
    results.comparisons["performance"].set_section(PERFORMANCE, _seed_with_detect(4.0))
    body = render_annotation(results).body
    assert "| ❌ ±6.0% (asked ±4%) |" in body and "| ±2.0% |" in body
    testcase = next(t for t in build_testcases(results) if t.name == "performance mean_ttft_ms")
    assert testcase.outcome == "failure" and testcase.message.startswith("TTFT can see ±6.0%, wider than the asked")


def test_detect_pct_is_read_and_checked():
    document = yaml.safe_load((REPO / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text(encoding="utf-8"))
    document["workloads"]["bench"]["metrics"] = {"mean_ttft_ms": {"detect_pct": 5}}
    (gate,) = bench_spec(parse_profile(document, "p.yaml")).metrics
    assert gate.detect_pct == 5.0 and gate.gated
    document["workloads"]["bench"]["metrics"] = {"mean_ttft_ms": {"detect_pct": 0}}
    with pytest.raises(UsageError, match=r"detect_pct"):
        parse_profile(document, "p.yaml")
