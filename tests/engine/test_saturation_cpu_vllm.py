"""Engine tier: saturation named (issue 44 part 2) on the real CPU vLLM. A repetition driven beyond what the server
serves is marked saturated, ``concurrency-bound``, in results.json, the JUnit XML and the annotation, as a warning
that never fails; one far below it is not.

Launches nothing of its own: it reads the session's shared run (``tiny_cpu_run``, tests/shared_run.py). Its
``overload`` shape asks 1000 req/s of a server it lets hold one request at a time (``max_concurrency: 1``): the
tiny model answers 16 tokens in 30-300 ms on these CPUs, so the 8 requests take 0.25-2.4 s where the asked rate
sends them in 8 ms, and the achieved rate lies at 5-40% of the rule's floor (90% of the rate an unsaturated server
shows, ``workloads.bench.load_of``), however fast or loaded the machine. tiny-cpu's own shape (16 requests at 8
req/s, at most 4 in flight) holds about one request in flight at a time (8 req/s x ~0.13 s), a quarter of its cap:
it reached 1.01-1.02 of its expected rate in the shared run, where the floor is 0.9.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from afd_e2e.profile.bench_spec import bench_spec
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.results.status import Saturation, Status
from shared_run import PROFILE

LAUNCHES = 0  # the most vLLM servers this module starts (tests/launch_counter.py): reads the session's shared run

pytestmark = pytest.mark.engine

CASES = ("cpu-tp1", "cpu-tp2")
COMPARISON = "tp1-vs-tp2"
OVERLOAD = "overload"


def _testcases(run) -> list[tuple[str, ET.Element]]:
    """Every testcase of the run's JUnit files with its name (each case's suite holds one of each name)."""
    return [
        (case.get("name", ""), case)
        for path in (run.out / "junit").glob("*.xml")
        for case in ET.parse(path).getroot().iter("testcase")
    ]


def test_a_repetition_beyond_the_servers_capacity_is_saturated_and_one_far_below_is_not(tiny_cpu_run):
    spec = bench_spec(PROFILE).shape(OVERLOAD)
    for case_id in CASES:
        performance = tiny_cpu_run.results.case(case_id).section(PERFORMANCE)
        overload = performance.shapes[OVERLOAD]
        assert overload.status is Status.PASSED, overload.failure  # a warning, never a failure
        for rep in overload.repetitions:
            load = rep.load
            assert load is not None and load.requested_rate == spec.request_rate, rep
            assert load.saturated is Saturation.CONCURRENCY_BOUND, (case_id, load)
            assert load.achieved_rate < load.floor_rate and load.max_concurrency == 1 <= load.peak_concurrency
        for rep in performance.repetitions:
            load = rep.load
            assert load is not None and load.saturated is None, (case_id, load)
            assert load.achieved_rate >= load.floor_rate and load.requested_rate == bench_spec(PROFILE).request_rate
        raw = tiny_cpu_run.data["cases"][case_id]["performance"]
        assert [r["load"]["saturated"] for r in raw["shapes"][OVERLOAD]["repetitions"]] == ["concurrency-bound"] * 2
        assert [r["load"]["saturated"] for r in raw["repetitions"]] == [None] * bench_spec(PROFILE).repetitions


def test_the_comparison_says_the_overload_was_compared_in_saturation_and_still_passes(tiny_cpu_run):
    performance = tiny_cpu_run.results.comparisons[COMPARISON].section(PERFORMANCE)
    assert performance.status is Status.PASSED and performance.saturated == []
    overload = performance.shapes[OVERLOAD]
    assert overload.status is Status.PASSED
    assert [side.split(":")[0] for side in overload.saturated] == list(CASES)
    assert all("saturated (concurrency-bound) in 2 of 2 repetitions" in side for side in overload.saturated)


def test_junit_and_the_annotation_show_the_saturation_as_a_warning(tiny_cpu_run):
    testcases = _testcases(tiny_cpu_run)
    runs = [case for name, case in testcases if name == f"performance runs {OVERLOAD}"]
    assert len(runs) == len(CASES)
    for case in runs:
        assert case.find("failure") is None and case.find("error") is None
        assert case.findtext("system-out").count("SATURATED (concurrency-bound): achieved") == 2
    plain = [case for name, case in testcases if name == "performance runs"]
    assert plain and all("SATURATED" not in (case.findtext("system-out") or "") for case in plain)

    metrics = [case for name, case in testcases if name.startswith(f"performance {OVERLOAD} ")]
    assert metrics, sorted(name for name, _ in testcases)
    for case in metrics:
        assert case.find("failure") is None and case.find("error") is None  # warned: a passing testcase
        assert case.findtext("system-out").startswith("warning: ")
        assert "compared in saturation: cpu-tp1: saturated (concurrency-bound)" in case.findtext("system-out")

    annotation = (tiny_cpu_run.out / "annotation.md").read_text(encoding="utf-8")
    # markdown_text escapes what Markdown would read: "(concurrency-bound)" is written \(concurrency\-bound\)
    assert annotation.count(r"⚠️ saturated \(concurrency\-bound\) in 2 of 2 repetitions") == len(CASES), annotation
    for side in (r"cpu\-tp1", r"cpu\-tp2"):
        assert rf"⚠️ Compared in saturation: {side}\: saturated \(concurrency\-bound\)" in annotation
