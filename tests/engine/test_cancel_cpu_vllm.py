"""A cancel during each phase of a real CPU vLLM case (tiny-cpu, cpu-tp1 with every phase): the run is recorded as
cancelled, never as an engine failure, in results.json, the annotation and JUnit (``skipped``, no failure), and
nothing is left running.
"""

from __future__ import annotations

import io
import json
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.results.store import results_to_json
from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.run import execute_run
from afd_e2e.system.markers import find_marked
from afd_e2e.system.progress import Progress
from repo_paths import GSM8K_DIR

pytestmark = pytest.mark.engine

PORT_BASE = 19660  # this module's block: one case at a time on 19660
PROFILE = load_profile("tiny-cpu")
# When to cancel after entering the phase: startup well into loading, workloads with requests or a bench in flight.
CANCEL_AFTER_S = {
    "startup": 3.0,
    "smoke": 0.0,
    "correctness": 1.0,
    "performance": 3.0,
    "capacity": 3.0,
    "teardown": 0.0,
}
WORKLOAD_PHASES = tuple(phase for phase in CANCEL_AFTER_S if phase not in ("startup", "teardown"))


class CancelDuring(Progress):
    """The runner's progress printer (quiet) that cancels the run ``delay_s`` after ``phase`` begins."""

    def __init__(self, phase: str, delay_s: float, flag: CancelFlag) -> None:
        super().__init__(stream=io.StringIO())
        self.target, self.delay_s, self.flag = phase, delay_s, flag
        self.entered: list[str] = []

    def enter(self, case_id, phase, logs=()):
        self.entered.append(phase)
        if phase == self.target and not self.flag.is_set():
            threading.Timer(self.delay_s, self.flag.cancel, args=("cancelled by SIGTERM",)).start()
        super().enter(case_id, phase, logs)


def junit_results(out: Path) -> dict[str, list[str]]:
    """Every testcase's result kind (failure, error, skipped, passed) by name, over all JUnit files."""
    kinds: dict[str, list[str]] = {"failure": [], "error": [], "skipped": [], "passed": []}
    for path in (out / "junit").glob("*.xml"):
        for case in ET.parse(path).getroot().iter("testcase"):
            kind = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
            kinds[kind].append(case.get("name", ""))
    return kinds


@pytest.mark.parametrize("phase", list(CANCEL_AFTER_S))
def test_a_cancel_during_each_phase_is_recorded_as_cancelled_everywhere(tiny_model, tmp_path, phase):
    plan = build_plan(PROFILE, model_path=str(tiny_model), case_ids=["cpu-tp1"], port_base=PORT_BASE)
    flag = CancelFlag()
    progress = CancelDuring(phase, CANCEL_AFTER_S[phase], flag)

    data = results_to_json(execute_run(PROFILE, plan, tmp_path, gsm8k_dir=GSM8K_DIR, progress=progress, flag=flag))

    assert phase in progress.entered
    assert plan.cases[0].phases == WORKLOAD_PHASES  # every phase of the case is cancelled in turn
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved == json.loads(json.dumps(data))
    assert saved["status"] == "cancelled" and saved["verdict"]["status"] == "cancelled"
    case = saved["cases"]["cpu-tp1"]
    assert case["status"] == ("passed" if phase == "teardown" else "cancelled"), case["failure"]
    for section in ("smoke", "gsm8k", "performance", "capacity"):
        part = case.get(section) or {}
        assert part.get("status") not in ("failed", "crashed", "running"), (section, part.get("failure"))
    hygiene = {c["check"]: c for c in case["hygiene"]}
    assert all(c["status"] != "failed" for c in hygiene.values()), hygiene
    assert find_marked(json.loads((tmp_path / "run-record.json").read_text())["run_id"]) == []

    annotation = (tmp_path / "annotation.md").read_text(encoding="utf-8")
    assert "cancelled" in annotation.splitlines()[0]
    verdicts = annotation.split("### Model output")[0]  # the per-question GSM8K rows below may be ❌ (random weights)
    assert "❌" not in verdicts

    junit = junit_results(tmp_path)
    assert junit["failure"] == [] and junit["error"] == [], junit
    if phase != "teardown":
        assert junit["skipped"], junit
