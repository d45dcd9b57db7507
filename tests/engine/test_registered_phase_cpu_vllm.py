"""A phase registered from one module under tests/ (``throwaway_phase``) runs in a real tiny-cpu case, and its
section reaches results.json, the JUnit file and the annotation with no product file naming it."""

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
        plan = dataclasses.replace(plan, cases=(dataclasses.replace(plan.cases[0], phases=("smoke", "echo")),))
        execute_run(PROFILE, plan, out, progress=Progress(stream=io.StringIO()))
        yield out


def test_the_registered_phase_runs_and_fills_its_own_section(echoed):
    data = json.loads((echoed / "results.json").read_text())
    case = data["cases"]["cpu-tp1"]
    assert data["status"] == "passed" and case["status"] == "passed", case["failure"]
    assert case["echo"] == {"status": "passed", "failure": None, "models": [PROFILE.model.served_name]}
    assert list(case["timings"]["phases"]) == ["smoke", "echo"]


def test_its_testcase_is_in_the_junit_file_and_its_section_in_the_annotation(echoed):
    (junit,) = (echoed / "junit").glob("*.xml")
    names = [t.get("name") for t in ET.parse(junit).getroot().iter("testcase")]
    assert "echo models" in names and names.index("smoke") < names.index("echo models")
    annotation = (echoed / "annotation.md").read_text(encoding="utf-8")
    assert (
        f"### Echo\n\n| Case | Served models |\n| --- | --- |\n| cpu-tp1 | {PROFILE.model.served_name} |" in annotation
    )
