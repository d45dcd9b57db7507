"""The verdict: passed only when every case passed and no comparison measure failed."""

from __future__ import annotations

from afd_e2e.runner.verdict import decide_verdict


def case(status, failure=None, **sections):
    return {"status": status, "label": "native DP1/TP1", "failure": failure, **sections}


def test_all_cases_passed_and_comparisons_fine_passes():
    data = {
        "cases": {"a": case("passed"), "b": case("passed")},
        "comparisons": {"a-vs-b": {"parity": {"status": "pass"}, "performance": {"status": "parity"}}},
    }

    verdict = decide_verdict(data)

    assert verdict["status"] == "passed"
    assert verdict["reasons"] == [
        "a (native DP1/TP1): passed",
        "b (native DP1/TP1): passed",
        "a-vs-b parity: pass",
        "a-vs-b performance: parity",
    ]


def test_a_failed_case_or_measure_fails_with_its_reason():
    failed_case = decide_verdict({"cases": {"a": case("failed", "smoke: HTTP 500"), "b": case("passed")}})
    failed_measure = decide_verdict(
        {"cases": {"a": case("passed")}, "comparisons": {"x": {"parity": {"status": "fail"}}}}
    )

    assert failed_case["status"] == "failed"
    assert "a (native DP1/TP1): failed: smoke: HTTP 500" in failed_case["reasons"]
    assert failed_measure["status"] == "failed"
    assert "x parity: fail" in failed_measure["reasons"]


def test_cancelled_and_crashed_runs_and_empty_runs():
    assert decide_verdict({"cases": {"a": case("passed")}}, cancelled="cancelled by SIGTERM") == {
        "status": "cancelled",
        "reasons": ["run cancelled by SIGTERM", "a (native DP1/TP1): passed"],
    }
    assert decide_verdict({"cases": {"a": case("crashed", "harness error: KeyError")}})["status"] == "crashed"
    assert decide_verdict({"cases": {}}, crashed="OSError: disk full")["status"] == "crashed"
    assert decide_verdict({"cases": {}}) == {"status": "failed", "reasons": ["no case ran"]}


def test_skipped_sections_are_named():
    data = {"cases": {"a": case("passed", gsm8k={"status": "skipped", "failure": "workloads not installed"})}}

    assert "a gsm8k: skipped (workloads not installed)" in decide_verdict(data)["reasons"]


def test_a_forced_routing_control_never_decides_the_verdict():
    data = {
        "cases": {"a": case("passed"), "b": case("passed")},
        "comparisons": {"a-vs-b-afd-balanced": {"performance": {"status": "failed", "control": True}}},
    }

    verdict = decide_verdict(data)

    assert verdict["status"] == "passed"
    assert "a-vs-b-afd-balanced performance: failed (forced-routing control, not in the verdict)" in verdict["reasons"]
