"""The verdict: passed only when every case passed and no comparison measure failed."""

from __future__ import annotations

from dataclasses import replace

from afd_e2e.report.annotation import render_annotation
from afd_e2e.results import gsm8k_records, parity_records, performance_records
from afd_e2e.results.gsm8k_records import Gsm8kResult
from afd_e2e.results.model import CaseResults, Comparison, RunVerdict
from afd_e2e.results.parity_records import ParityComparison
from afd_e2e.results.performance_records import PerformanceComparison
from afd_e2e.results.status import Status
from afd_e2e.runner.verdict import decide_verdict
from results_docs import load_fixture, typed

SEED = typed(load_fixture("seed"))


def run(cases: dict[str, CaseResults], comparisons: dict[str, Comparison] | None = None):
    return replace(SEED, cases=cases, comparisons=comparisons or {})


def case(status: Status, failure: str | None = None, **sections) -> CaseResults:
    return CaseResults("a", "native DP1/TP1", "native", status, failure, **sections)


def parity(status: Status) -> dict[str, ParityComparison]:
    """A comparison's parity section, as its ``extra`` holds it."""
    return {parity_records.SECTION: ParityComparison(status, None, identical=1, total=1, share=1.0, min_share=1.0)}


def test_all_cases_passed_and_comparisons_fine_passes():
    measured = {**parity(Status.PASSED), performance_records.SECTION: PerformanceComparison(Status.PASSED)}
    comparison = Comparison("a", "b", "A", "B", extra=measured)

    verdict = decide_verdict(run({"a": case(Status.PASSED), "b": case(Status.PASSED)}, {"a-vs-b": comparison}))

    assert verdict.status is Status.PASSED
    assert verdict.reasons == [
        "a (native DP1/TP1): passed",
        "b (native DP1/TP1): passed",
        "a-vs-b parity: passed",
        "a-vs-b performance: passed",
    ]


def test_a_failed_case_or_measure_fails_with_its_reason():
    failed_case = decide_verdict(run({"a": case(Status.FAILED, "smoke: HTTP 500"), "b": case(Status.PASSED)}))
    failed_measure = decide_verdict(
        run({"a": case(Status.PASSED)}, {"x": Comparison("a", "b", "A", "B", extra=parity(Status.FAILED))})
    )

    assert failed_case.status is Status.FAILED
    assert "a (native DP1/TP1): failed: smoke: HTTP 500" in failed_case.reasons
    assert failed_measure.status is Status.FAILED
    assert "x parity: failed" in failed_measure.reasons


def test_cancelled_and_crashed_runs_and_empty_runs():
    assert decide_verdict(run({"a": case(Status.PASSED)}), cancelled="cancelled by SIGTERM") == RunVerdict(
        Status.CANCELLED, ["run cancelled by SIGTERM", "a (native DP1/TP1): passed"]
    )
    assert decide_verdict(run({"a": case(Status.CRASHED, "harness error: KeyError")})).status is Status.CRASHED
    assert decide_verdict(run({}), crashed="OSError: disk full").status is Status.CRASHED
    assert decide_verdict(run({})) == RunVerdict(Status.FAILED, ["no case ran"])


def test_skipped_sections_are_named():
    gsm8k = Gsm8kResult(Status.SKIPPED, 0, 7, 7, True, 0, "gsm8k/a.jsonl", failure="workloads not installed")

    assert (
        "a gsm8k: skipped (workloads not installed)"
        in decide_verdict(run({"a": case(Status.PASSED, extra={gsm8k_records.SECTION: gsm8k})})).reasons
    )


def test_a_forced_routing_control_never_decides_the_verdict():
    failed = PerformanceComparison(Status.FAILED, control=True)
    control = Comparison("a", "b", "A", "B", extra={performance_records.SECTION: failed})

    verdict = decide_verdict(
        run({"a": case(Status.PASSED), "b": case(Status.PASSED)}, {"a-vs-b-afd-balanced": control})
    )

    assert verdict.status is Status.PASSED
    assert "a-vs-b-afd-balanced performance: failed (forced-routing control, not in the verdict)" in verdict.reasons


def test_a_measure_that_passed_with_a_warning_says_so_in_its_line():
    """The real CPU capacity run with its tp1-vs-tp2 capacity worse under ``on_worse: warn`` (the warning its
    serving-limit comparison fails on, moved to a passing one): the summary listed "⚠️ capacity at SLO worse"
    beside "tp1-vs-tp2 capacity: passed"; the line now says it passed with a warning."""
    results = typed(load_fixture("tiny-cpu-capacity"))
    worse = results.comparisons["serving-limit"].section("capacity").failure
    comparison = results.comparisons["tp1-vs-tp2"]
    comparison.set_section("capacity", replace(comparison.section("capacity"), warnings=[worse]))

    results.verdict = decide_verdict(results)

    assert "tp1-vs-tp2 capacity: passed with a warning" in results.verdict.reasons
    assert "serving-limit capacity: failed" in results.verdict.reasons  # a failed one is only failed
    body = render_annotation(results).body
    assert "- ⚠️ tp1\\-vs\\-tp2\\: capacity at SLO worse" in body
    assert "- tp1\\-vs\\-tp2 capacity\\: passed with a warning" in body
