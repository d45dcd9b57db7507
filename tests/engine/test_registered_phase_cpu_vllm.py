"""Engine tier: a phase registered from one module under tests/ (``throwaway_phase``) runs in a real tiny-cpu case,
and its section reaches results.json, the JUnit file and the annotation with no product file naming it. The same
case runs the built-in ``warmup`` phase (``phases/warmup.py``) between smoke and echo: its requests reach the real
engine and their latencies reach results.json and a JUnit testcase. One vLLM launch (cpu-tp1), for both."""

from __future__ import annotations

import dataclasses
import io
import json
import xml.etree.ElementTree as ET

import pytest

from afd_e2e.phases import registry
from afd_e2e.phases.rendering import rendered
from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.runner.run import execute_run
from afd_e2e.system.progress import Progress
from throwaway_phase import ECHO, ECHO_REPORT

pytestmark = pytest.mark.engine

PORT_BASE = 19900  # this module's port: 19900 (cpu-tp1)
PROFILE = load_profile("tiny-cpu")


@pytest.fixture(scope="module")
def echoed(tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("echo")
    with registry.registered(ECHO), rendered(ECHO_REPORT):
        plan = build_plan(PROFILE, model_path=str(tiny_model), case_ids=["cpu-tp1"], port_base=PORT_BASE)
        plan = dataclasses.replace(
            plan, cases=(dataclasses.replace(plan.cases[0], phases=("smoke", "warmup", "echo")),)
        )
        execute_run(PROFILE, plan, out, progress=Progress(stream=io.StringIO()))
        yield out


def test_the_registered_phase_runs_and_fills_its_own_section(echoed):
    data = json.loads((echoed / "results.json").read_text())
    case = data["cases"]["cpu-tp1"]
    assert data["status"] == "passed" and case["status"] == "passed", case["failure"]
    assert case["echo"] == {"status": "passed", "failure": None, "models": [PROFILE.model.served_name]}
    assert list(case["timings"]["phases"]) == ["smoke", "warmup", "echo"]


def test_the_warmup_phase_sent_its_requests_to_the_engine_and_recorded_each_latency(echoed):
    warmup = json.loads((echoed / "results.json").read_text())["cases"]["cpu-tp1"]["warmup"]
    assert warmup["status"] == "passed" and warmup["failure"] is None
    assert len(warmup["latencies_s"]) == 4 and all(latency > 0 for latency in warmup["latencies_s"])
    assert (warmup["first_s"], warmup["last_s"]) == (warmup["latencies_s"][0], warmup["latencies_s"][-1])
    (junit,) = (echoed / "junit").glob("*.xml")
    (testcase,) = [t for t in ET.parse(junit).getroot().iter("testcase") if t.get("name") == "warmup"]
    assert testcase.find("failure") is None


def test_its_testcase_is_in_the_junit_file_and_its_section_in_the_annotation(echoed):
    (junit,) = (echoed / "junit").glob("*.xml")
    names = [t.get("name") for t in ET.parse(junit).getroot().iter("testcase")]
    assert "echo models" in names and names.index("smoke") < names.index("warmup") < names.index("echo models")
    annotation = (echoed / "annotation.md").read_text(encoding="utf-8")
    assert (
        f"### Echo\n\n| Case | Served models |\n| --- | --- |\n| cpu-tp1 | {PROFILE.model.served_name} |" in annotation
    )
