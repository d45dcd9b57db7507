"""A dead engine on the real CPU vLLM (tiny-cpu): the ``VLLM::EngineCore`` process is killed while its API server
stays up, after ready (mid-bench) and during start-up. The case fails within seconds naming the role and quoting
the cause from its log, the bench stops at once, and nothing needs a forced kill. Killed mid-bench, the case's failure
is in results.json before the teardown begins, with forensics of the processes that survived it (their state and
stacks, dumped by py-spy), shown in the annotation.

Two vLLM launches, one per death (each ends its server): mid-bench, and during start-up.
"""

from __future__ import annotations

import dataclasses
import io
import json
import threading
import time
from pathlib import Path

import psutil
import pytest

from afd_e2e.forensics.pyspy import find_pyspy
from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.results.store import results_to_json
from afd_e2e.runner.run import execute_run
from afd_e2e.system.markers import find_marked
from afd_e2e.system.progress import Progress
from afd_e2e.telemetry.engine_metrics import read_metrics
from repo_paths import GSM8K_DIR
from stall_support import bench_processes, engine_core_of

# the most vLLM servers this module starts (tests/launch_counter.py): one per death: mid-bench, during start-up
LAUNCHES = 2

pytestmark = pytest.mark.engine

PORT_BASE = 19600  # this module's block: 19600 (after ready), 19620 (during start-up)
PROFILE = load_profile("tiny-cpu")
# The kill to the case's teardown: the watch's detection (its tight figure, <= 1 s, is measured by
# benchmarks/lifecycle.py --parts deaths), then the phase's work wound down (STOP_JOIN_S) and the survivors' stacks
# dumped (py-spy) before the teardown begins: 2.0 s mid-bench and 3.3 s during start-up on 2 cores at load average
# 9.5, so 5 s kept as little as 1.7 s. 10 s keeps three times the loaded figure; a watch blind to the death still
# fails: the case would wait out budgets.startup_s (300 s) or the repetition's budget, or read "exited with code 0"
# once vLLM's API server gives up on its engine, which the failure's words refuse.
DETECTION_LIMIT_S = 10.0


class PhaseClock(Progress):
    """A quiet progress printer noting when each phase began (monotonic) and keeping every line; it reads the
    case's results.json from disk the moment the teardown begins (``at_teardown``)."""

    def __init__(self, out: Path | None = None) -> None:
        self.lines = io.StringIO()
        super().__init__(stream=self.lines)
        self.began: dict[str, float] = {}
        self.out, self.at_teardown = out, None

    def enter(self, case_id, phase, logs=()):
        self.began.setdefault(phase, time.monotonic())
        if phase == "teardown" and self.out is not None and self.at_teardown is None:
            self.at_teardown = json.loads((self.out / "results.json").read_text())["cases"][case_id]
        super().enter(case_id, phase, logs)


def one_case_plan(model: Path, port_base: int, phases: tuple[str, ...]):
    plan = build_plan(PROFILE, model_path=str(model), case_ids=["cpu-tp1"], port_base=port_base)
    return dataclasses.replace(plan, cases=(dataclasses.replace(plan.cases[0], phases=phases),))


class EngineKiller:
    """Kills the case's EngineCore with SIGKILL once ``ready_to_kill(out)`` holds, asked every ``poll_s``; notes
    when (monotonic)."""

    def __init__(self, out: Path, ready_to_kill, poll_s: float = 0.02) -> None:
        self.out, self.ready_to_kill, self.poll_s = out, ready_to_kill, poll_s
        self.killed_at: float | None = None
        self.api_alive_after_kill: bool | None = None
        self.pids: dict[str, int] = {}
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        record = self.out / "run-record.json"
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if record.exists() and (processes := json.loads(record.read_text())["processes"]):
                api_pid = processes[0]["pid"]
                core = engine_core_of(api_pid)
                if core is not None and self.ready_to_kill(self.out):
                    self.pids.update(engine=core.pid, server=api_pid)
                    core.kill()
                    self.killed_at = time.monotonic()
                    time.sleep(0.1)
                    self.api_alive_after_kill = psutil.pid_exists(api_pid)
                    return
            time.sleep(self.poll_s)


def run_id_of(out: Path) -> str:
    return json.loads((out / "run-record.json").read_text())["run_id"]


def test_an_engine_killed_mid_bench_fails_the_case_within_seconds_and_stops_the_bench(tiny_model, tmp_path):
    """Also (merged from test_process_accounting_cpu_vllm.py, one launch for both) the failure is on record before
    the teardown, with forensics of the survivors."""

    def bench_running(_out: Path) -> bool:
        # The engine's own gauge: the first command's requests are running (the warm client's log, or the client
        # alive, says nothing of its traffic: a loaded machine could kill between two commands, after a warmup had
        # passed). Read every 0.25 s: each read is a connection the watchdog counts as a request in flight.
        metrics = read_metrics(f"http://127.0.0.1:{PORT_BASE}/metrics")
        return bool(metrics and (metrics.running or 0) > 0)

    clock = PhaseClock(tmp_path)
    killer = EngineKiller(tmp_path, bench_running, poll_s=0.25)
    data = results_to_json(
        execute_run(
            PROFILE,
            one_case_plan(tiny_model, PORT_BASE, ("performance",)),
            tmp_path,
            progress=clock,
            gsm8k_dir=GSM8K_DIR,
        )
    )
    case = data["cases"]["cpu-tp1"]

    assert killer.killed_at is not None and killer.api_alive_after_kill  # the API server outlived its engine
    assert case["status"] == "failed"
    assert case["failure"].startswith("server engine died during performance ("), case["failure"]
    assert "engine core exited unexpectedly" in case["failure"]  # the cause, quoted from the server's log
    print(f"mid-bench kill to teardown: {clock.began['teardown'] - killer.killed_at:.2f} s")
    assert clock.began["teardown"] - killer.killed_at < DETECTION_LIMIT_S
    performance = case["performance"]
    assert performance["status"] == "failed"
    assert performance["failure"].startswith("stopped: server died")
    assert bench_processes(PORT_BASE) == []  # the bench was stopped, not left running against a dead port
    assert len(performance["warmups"]) + len(performance["repetitions"]) == 1  # no repetition after the death
    hygiene = {c["check"]: c["status"] for c in case["hygiene"]}
    assert hygiene["forced_kill"] == "passed" and hygiene["processes"] == "passed"
    assert find_marked(run_id_of(tmp_path)) == []
    assert data["verdict"]["status"] == "failed"
    assert_on_record_before_teardown_with_forensics(tmp_path, case, clock.at_teardown, killer.pids)


def assert_on_record_before_teardown_with_forensics(out: Path, case: dict, on_disk: dict | None, killed: dict) -> None:
    """The failure was in results.json when the teardown began, with the forensics taken then (py-spy's dumps of
    the API server that outlived its engine), and the annotation shows them."""
    assert on_disk is not None and on_disk["status"] == "failed" and on_disk["failure"] == case["failure"]
    [taken] = on_disk["forensics"]  # also taken before the teardown
    assert taken["trigger"] == "death" and taken["reason"] == case["failure"] and taken["seconds"] < 10
    if find_pyspy() is None:
        pytest.skip("py-spy is not installed (pip install 'py-spy>=0.4.3,<0.5'): no stacks to check")
    dumps = {d["pid"]: d for d in taken["processes"]}
    server = dumps[killed["server"]]
    assert server["role"] == "server", server
    assert killed["engine"] not in dumps or dumps[killed["engine"]]["status"] == "zombie"
    if server["failure"] in ("the process is gone", "a zombie: it has exited, nothing to dump"):
        # vLLM's API server shuts itself down soon after its engine died; some runs lose that race before py-spy
        # reaches it (gone, or a zombie). The record says so instead of holding stacks.
        assert not server["busy_frames"] and server["mode"] is None
        return
    assert server["mode"] in ("native", "python"), server  # its threads' stacks; busy ones only where it was busy
    text = (out / server["path"]).read_text()
    assert f"pid {killed['server']}" in text and "state: " in text and "Thread " in text
    annotation = (out / "annotation.md").read_text()
    assert "### Forensics" in annotation and f"artifact://{server['path']}" in annotation


def test_an_engine_killed_during_startup_fails_the_case_within_seconds_naming_the_role(tiny_model, tmp_path):
    clock = PhaseClock()
    killer = EngineKiller(tmp_path, lambda _out: True)  # as soon as the EngineCore exists
    data = results_to_json(
        execute_run(PROFILE, one_case_plan(tiny_model, PORT_BASE + 20, ("smoke",)), tmp_path, progress=clock)
    )
    case = data["cases"]["cpu-tp1"]

    assert killer.killed_at is not None
    assert case["status"] == "failed"
    assert case["failure"].startswith("server "), case["failure"]
    assert "during start-up" in case["failure"]
    assert case["timings"]["launch_to_ready_s"] is None
    print(f"start-up kill to teardown: {clock.began['teardown'] - killer.killed_at:.2f} s")
    assert clock.began["teardown"] - killer.killed_at < DETECTION_LIMIT_S
    assert case["log_tail"]
    hygiene = {c["check"]: c["status"] for c in case["hygiene"]}
    assert hygiene["forced_kill"] == "passed" and hygiene["processes"] == "passed"
    assert find_marked(run_id_of(tmp_path)) == []
