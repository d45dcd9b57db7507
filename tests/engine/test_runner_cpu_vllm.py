"""The runner against a real vLLM on the CPU (tiny-cpu): lifecycle, hygiene, a server dying at start, cancel.

Two vLLM launches of its own: a server given a flag it refuses (it dies at start-up, in seconds), and one that
``afd-e2e run`` is cancelled (SIGTERM) during its start-up; each is about a server's life, so neither can share.
The lifecycle and reports of a passing run are checked on the session's shared run (``tiny_cpu_run``,
tests/shared_run.py), which launched cpu-tp1 and cpu-tp2 through the same runner.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import psutil
import pytest

from afd_e2e.phases.smoke import smoke_spec
from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.results.store import results_to_json
from afd_e2e.runner.cleanup import RUNNER_GRACE_S
from afd_e2e.runner.run import execute_run
from afd_e2e.system.markers import find_marked
from afd_e2e.system.ports import busy_ports
from afd_e2e.system.progress import Progress, meaningful
from cancel_support import assert_cancelled_everywhere
from repo_paths import GSM8K_DIR
from shared_run import PORT_BASE as SHARED_PORT_BASE

# the most vLLM servers this module starts (tests/launch_counter.py): a server that dies at start-up, a run
# cancelled during start-up
LAUNCHES = 2

pytestmark = pytest.mark.engine

PORT_BASE = 19240  # this module's block: 19240 (dying at start), 19260 (SIGTERM mid-start-up)
PROFILE = load_profile("tiny-cpu")


class PhaseClock(Progress):
    """A quiet progress printer that notes when each phase began (wall clock)."""

    def __init__(self) -> None:
        super().__init__(stream=io.StringIO())
        self.began: dict[str, float] = {}

    def enter(self, case_id, phase, logs=()):
        self.began.setdefault(phase, time.time())
        super().enter(case_id, phase, logs)


def smoke_only_plan(model: Path, port_base: int, extra_args: tuple[str, ...] = ()):
    """cpu-tp1 with the smoke phase only (the workloads are not this module's subject)."""
    plan = build_plan(PROFILE, model_path=str(model), case_ids=["cpu-tp1"], port_base=port_base)
    case = plan.cases[0]
    process = dataclasses.replace(case.processes[0], argv=case.processes[0].argv + extra_args)
    case = dataclasses.replace(case, phases=("smoke",), processes=(process,))
    return dataclasses.replace(plan, cases=(case,))


def watch_first_exit(out: Path) -> dict[str, float]:
    """Note (wall clock) when the run's first process exits, through a pidfd: it never reaps, so never races."""
    seen: dict[str, float] = {}

    def watch() -> None:
        record = out / "run-record.json"
        while not (record.exists() and json.loads(record.read_text())["processes"]):
            time.sleep(0.01)
        pidfd = os.pidfd_open(json.loads(record.read_text())["processes"][0]["pid"])
        select.select([pidfd], [], [])
        seen["exit"] = time.time()
        os.close(pidfd)

    threading.Thread(target=watch, daemon=True).start()
    return seen


def run_id_of(out: Path) -> str:
    return json.loads((out / "run-record.json").read_text())["run_id"]


@pytest.fixture(scope="module")
def served(tiny_cpu_run):
    """The shared run's folder and results (cpu-tp1 and cpu-tp2, every phase, started and ended by the runner)."""
    return tiny_cpu_run.out, tiny_cpu_run.data


def case_suite(out: Path, case_id: str) -> ET.Element:
    """The JUnit suite of ``case_id`` (one file per case and comparison)."""
    for path in (out / "junit").glob("*.xml"):
        for suite in ET.parse(path).getroot().iter("testsuite"):
            if suite.get("name", "").endswith(case_id):
                return suite
    raise AssertionError(f"no JUnit suite for {case_id} in {out / 'junit'}")


def test_start_ready_smoke_and_teardown_leave_a_clean_machine(served):
    out, data = served
    case = data["cases"]["cpu-tp1"]

    assert data["status"] == "passed" and data["verdict"]["status"] == "passed"
    assert case["status"] == "passed", case["failure"]
    assert case["smoke"]["status"] == "passed"
    assert case["smoke"]["completion_tokens"] == smoke_spec(PROFILE).max_tokens
    assert case["smoke"]["completion"]
    assert 0 < case["timings"]["launch_to_ready_s"] < PROFILE.budgets.startup_s
    assert case["timings"]["teardown_s"] < PROFILE.budgets.teardown_s
    assert case["processes"][0]["exit_code"] == 0 and case["processes"][0]["forced_kill"] is False
    assert {c["check"]: c["status"] for c in case["hygiene"]} == {
        "processes": "passed",
        "forced_kill": "passed",
        "ports": "passed",
        "gpu_memory": "skipped",
        "leftover_files": "passed",
    }
    assert "sockets" in next(c for c in case["hygiene"] if c["check"] == "leftover_files")["detail"]
    assert "Starting vLLM server" in (out / case["processes"][0]["log"]).read_text()
    assert find_marked(run_id_of(out)) == []
    assert busy_ports([SHARED_PORT_BASE]) == {}
    assert json.loads((out / "results.json").read_text()) == json.loads(json.dumps(data))


def test_the_real_run_is_reported(served):
    out, _ = served
    annotation = (out / "annotation.md").read_text(encoding="utf-8")
    # passed; ⚠️ where a comparison of the shared run's full phases warns (two bench repetitions rarely decide)
    assert re.match(r"## (✅|⚠️) SMOKE afd-e2e tiny\\-cpu: passed\n", annotation), annotation.splitlines()[0]
    hygiene = (
        "| native DP1/TP1 (<code>cpu\\-tp1</code>) | ✅ | ✅ | ⏭️ runs on the CPU\\: no GPU memory to check | ✅ | ✅ |"
    )
    assert hygiene in annotation.splitlines()  # a CPU case has no GPU memory: said so, not NVML's error
    suite = case_suite(out, "cpu-tp1")
    assert int(suite.get("failures", "0")) == 0 and int(suite.get("tests", "0")) > 0


def test_a_server_dying_at_start_is_reported_within_a_second_with_its_log(tiny_model, tmp_path):
    clock = PhaseClock()
    exited = watch_first_exit(tmp_path)
    data = results_to_json(
        execute_run(PROFILE, smoke_only_plan(tiny_model, PORT_BASE, ("--no-such-flag",)), tmp_path, progress=clock)
    )
    case = data["cases"]["cpu-tp1"]

    assert case["status"] == "failed"
    assert case["failure"].startswith("server exited with code 2 during start-up")
    assert "--no-such-flag" in case["log_tail"]
    assert clock.began["teardown"] - exited["exit"] < 1.0
    assert find_marked(run_id_of(tmp_path)) == []


def test_sigterm_to_afd_e2e_run_mid_startup_leaves_no_vllm_and_cancelled_results_everywhere(tiny_model, tmp_path):
    argv = [sys.executable, "-m", "afd_e2e", "run", "--profile", "tiny-cpu", "--model", str(tiny_model)]
    argv += [
        "--case",
        "cpu-tp1",
        "--port-base",
        str(PORT_BASE + 20),
        "--out",
        str(tmp_path),
        "--gsm8k-dir",
        str(GSM8K_DIR),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    runner = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    record = tmp_path / "run-record.json"
    deadline = time.monotonic() + 60
    while not (record.exists() and json.loads(record.read_text())["processes"]) and time.monotonic() < deadline:
        assert runner.poll() is None, f"afd-e2e run exited {runner.returncode} before launching: {runner.stdout.read()}"
        time.sleep(0.05)
    vllm_pid = json.loads(record.read_text())["processes"][0]["pid"]
    log = tmp_path / "logs" / "cpu-tp1" / "server.log"
    while not (log.exists() and any(meaningful(line) for line in log.read_text(errors="replace").splitlines())):
        assert time.monotonic() < deadline + 120, f"vLLM logged nothing: {log}"
        time.sleep(0.05)  # vLLM runs its own start-up (it logs), far from ready: a condition, not a sleep

    runner.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    output, _ = runner.communicate(timeout=30)
    took = time.monotonic() - sent

    results = assert_cancelled_everywhere(tmp_path, "cpu-tp1", "startup")  # also the cancel-per-phase test's
    assert runner.returncode == 1, output
    # Within the run's share of Buildkite's 10 s grace (RUNNER_GRACE_S: the cancel's teardown grace, then its
    # records), which a loaded machine keeps; a run that hangs on the cancel, or outlasts the grace (the agent would
    # SIGKILL it before its records), fails it. The tight figure (the run's exit within CANCEL_GRACE_S) is measured
    # by benchmarks/lifecycle.py --parts cancel, against vLLM's own exit on the same signal.
    print(f"SIGTERM to the run's exit: {took:.2f} s")
    assert took < RUNNER_GRACE_S, (took, output)
    assert results["status"] == "cancelled"
    assert results["preflight"]["status"] == "passed" and results["preflight"]["checks"]  # taken before the launch
    assert results["cases"]["cpu-tp1"]["status"] == "cancelled"
    assert results["cases"]["cpu-tp1"]["failure"] == "cancelled by SIGTERM"
    assert find_marked(run_id_of(tmp_path)) == []
    assert not psutil.pid_exists(vllm_pid) or psutil.Process(vllm_pid).status() == psutil.STATUS_ZOMBIE
