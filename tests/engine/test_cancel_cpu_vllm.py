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
import time

import pytest

from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.results.store import results_to_json
from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.run import execute_run
from afd_e2e.system.progress import Progress
from afd_e2e.telemetry.engine_metrics import read_metrics
from cancel_support import assert_cancelled_everywhere
from repo_paths import GSM8K_DIR

# the most vLLM servers this module starts (tests/launch_counter.py): one per phase cancelled: smoke, performance,
# capacity
LAUNCHES = 3

pytestmark = pytest.mark.engine

PORT_BASE = 19660  # this module's block: one case at a time on 19660
PROFILE = load_profile("tiny-cpu")
# When to cancel once the phase has begun: smoke at once (its one request), a bench's phases once the engine has its
# requests running (a condition, not seconds: a timer landed before a loaded machine's bench sent anything).
RUNNING = "requests running"
CANCEL_WHEN = {"smoke": "at once", "performance": RUNNING, "capacity": RUNNING}
WORKLOAD_PHASES = ("smoke", "correctness", "performance", "capacity")


class CancelDuring(Progress):
    """The runner's progress printer (quiet) that cancels the run once ``phase`` has begun and, for ``RUNNING``,
    the API on ``port`` reports requests running in its engine (polled every 0.25 s while the phase lasts: a phase
    that ran none is not cancelled, and the test fails)."""

    def __init__(self, phase: str, when: str, flag: CancelFlag, port: int) -> None:
        super().__init__(stream=io.StringIO())
        self.target, self.when, self.flag = phase, when, flag
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.entered: list[str] = []

    def enter(self, case_id, phase, logs=()):
        self.entered.append(phase)
        if phase == self.target and not self.flag.is_set():
            threading.Thread(target=self._cancel, daemon=True).start()
        super().enter(case_id, phase, logs)

    def _cancel(self) -> None:
        while self.when == RUNNING and not ((metrics := read_metrics(self.url)) and (metrics.running or 0) > 0):
            if self.entered[-1] != self.target:
                return
            time.sleep(0.25)
        self.flag.cancel("cancelled by SIGTERM")


@pytest.mark.parametrize("phase", list(CANCEL_WHEN))
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
    progress = CancelDuring(phase, CANCEL_WHEN[phase], flag, PORT_BASE)

    data = results_to_json(execute_run(PROFILE, plan, tmp_path, gsm8k_dir=GSM8K_DIR, progress=progress, flag=flag))

    assert phase in progress.entered
    saved = assert_cancelled_everywhere(tmp_path, "cpu-tp1", phase)
    assert saved == json.loads(json.dumps(data))
