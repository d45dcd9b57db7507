"""A cancel during each workload phase of a real CPU vLLM case (tiny-cpu, cpu-tp1 with every phase): the run is
recorded as cancelled, never as an engine failure, in results.json, the annotation and JUnit (``skipped``, no
failure), and nothing is left running (``tests/cancel_support.py``).

Three vLLM launches, one per phase cancelled here (smoke, performance, capacity): a cancel ends its run, so each
phase's cancel needs a server of its own. The other phases are cancelled in runs that launch a server anyway:
start-up by ``afd-e2e run``'s SIGTERM in ``test_runner_cpu_vllm.py``, correctness in the leader of
``test_two_agents_cpu_vllm.py``'s cancelled build (the leader runs the workloads against its follower's real
engine), teardown in the slow-step run of ``test_stall_cpu_vllm.py``.
"""

from __future__ import annotations

import dataclasses
import io
import json
import threading

import pytest

from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.results.store import results_to_json
from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.run import execute_run
from afd_e2e.system.progress import Progress
from cancel_support import assert_cancelled_everywhere
from repo_paths import GSM8K_DIR

pytestmark = pytest.mark.engine

PORT_BASE = 19660  # this module's block: one case at a time on 19660
PROFILE = load_profile("tiny-cpu")
# When to cancel after entering the phase: with requests or a bench in flight.
CANCEL_AFTER_S = {"smoke": 0.0, "performance": 3.0, "capacity": 3.0}
WORKLOAD_PHASES = ("smoke", "correctness", "performance", "capacity")


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


@pytest.mark.parametrize("phase", list(CANCEL_AFTER_S))
def test_a_cancel_during_each_phase_is_recorded_as_cancelled_everywhere(tiny_model, tmp_path, phase):
    plan = build_plan(PROFILE, model_path=str(tiny_model), case_ids=["cpu-tp1"], port_base=PORT_BASE)
    assert plan.cases[0].phases == WORKLOAD_PHASES  # every phase of the case is cancelled in turn (or elsewhere)
    # The case starts at the cancelled phase: the phases before it would only spend CI's time (a cancel during
    # capacity once waited ~45 s of correctness and performance first) and their own cancels are tested apart. The
    # phase after it stays: smoke's one request can end before the cancel lands, and the case is then cancelled
    # before its next phase, not passed with nothing left to run.
    start = WORKLOAD_PHASES.index(phase)
    plan = dataclasses.replace(
        plan, cases=(dataclasses.replace(plan.cases[0], phases=WORKLOAD_PHASES[start : start + 2]),)
    )
    flag = CancelFlag()
    progress = CancelDuring(phase, CANCEL_AFTER_S[phase], flag)

    data = results_to_json(execute_run(PROFILE, plan, tmp_path, gsm8k_dir=GSM8K_DIR, progress=progress, flag=flag))

    assert phase in progress.entered
    saved = assert_cancelled_everywhere(tmp_path, "cpu-tp1", phase)
    assert saved == json.loads(json.dumps(data))
