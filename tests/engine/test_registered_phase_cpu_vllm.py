"""A phase registered from one module under tests/ (``throwaway_phase``) runs in a real tiny-cpu case, and its
section reaches results.json, the JUnit file and the annotation with no product file naming it. The same cases run
the built-in ``warmup`` phase (``phases/warmup.py``) after smoke: its requests reach the real engine and their
latencies reach results.json and a JUnit testcase.

Launches no server of its own: the session's shared run (``tiny_cpu_run``, tests/shared_run.py) registers ``echo``
for its length and runs it in both cases, after the shipped phases.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from afd_e2e.profile import load_profile

LAUNCHES = 0  # the most vLLM servers this module starts (tests/launch_counter.py): reads the session's shared run

pytestmark = pytest.mark.engine

PROFILE = load_profile("tiny-cpu")


def case_junit(out, case_id: str) -> ET.Element:
    """The JUnit file whose suite is ``case_id``'s."""
    for path in (out / "junit").glob("*.xml"):
        root = ET.parse(path).getroot()
        if any(suite.get("name", "").endswith(case_id) for suite in root.iter("testsuite")):
            return root
    raise AssertionError(f"no JUnit suite for {case_id} in {out / 'junit'}")


def test_the_registered_phase_runs_and_fills_its_own_section(tiny_cpu_run):
    data = tiny_cpu_run.data
    assert data["status"] == "passed"
    for case_id in ("cpu-tp1", "cpu-tp2"):
        case = data["cases"][case_id]
        assert case["status"] == "passed", case["failure"]
        assert case["echo"] == {"status": "passed", "failure": None, "models": [PROFILE.model.served_name]}
        phases = list(case["timings"]["phases"])
        assert phases.index("smoke") < phases.index("warmup") < phases.index("echo")  # in their registered places


def test_the_warmup_phase_sent_its_requests_to_the_engine_and_recorded_each_latency(tiny_cpu_run):
    warmup = tiny_cpu_run.data["cases"]["cpu-tp1"]["warmup"]
    assert warmup["status"] == "passed" and warmup["failure"] is None
    assert len(warmup["latencies_s"]) == 4 and all(latency > 0 for latency in warmup["latencies_s"])
    assert (warmup["first_s"], warmup["last_s"]) == (warmup["latencies_s"][0], warmup["latencies_s"][-1])
    testcases = case_junit(tiny_cpu_run.out, "cpu-tp1").iter("testcase")
    (testcase,) = [t for t in testcases if t.get("name") == "warmup" and t.get("classname", "").endswith(".cpu-tp1")]
    assert testcase.find("failure") is None


def test_its_testcase_is_in_the_junit_file_and_its_section_in_the_annotation(tiny_cpu_run):
    names = [t.get("name") for t in case_junit(tiny_cpu_run.out, "cpu-tp1").iter("testcase")]
    assert "echo models" in names and names.index("smoke") < names.index("warmup") < names.index("echo models")
    annotation = (tiny_cpu_run.out / "annotation.md").read_text(encoding="utf-8")
    assert (
        f"### Echo\n\n| Case | Served models |\n| --- | --- |\n| cpu-tp1 | {PROFILE.model.served_name} |" in annotation
    )
