"""``afd-e2e cleanup``: ends what a run left (found by its record and markers) and is safe when nothing is left."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
from stand_ins import IGNORES_SIGTERM, SLEEPER, UNIT_PORT_BASE, stand_in_case, stand_in_plan, wait_for_log

from afd_e2e.cli import main
from afd_e2e.results import load_results
from afd_e2e.results.model import CheckRecord
from afd_e2e.results.status import Status
from afd_e2e.runner.cancellation import CANCEL_GRACE_S
from afd_e2e.runner.cleanup import clean_up
from afd_e2e.runner.hygiene import PORT_SETTLE_S, GpuSnapshot
from afd_e2e.runner.layout import RunLayout
from afd_e2e.runner.run_record import RunRecord
from afd_e2e.runner.teardown import terminate
from afd_e2e.system.markers import find_marked, is_alive
from junit_xsd import assert_valid_junit
from unit.timing import GUARD_S, FakeClock, eventually, wait_until


def statuses(checks):
    return {c.check: c.status for c in checks}


# A whole runner process (stand_in_run.py) imports afd-e2e with its renderers (about a second of CPU), launches, and
# when cancelled tears down and renders its reports; in the unit tier it runs at nice 10 beside cores the engine
# tier saturates, on a tenth of a core or less. Its waits are guarded against a hang, never timed: generously.
RUNNER_GUARD_S = 4 * GUARD_S


def once_gone(*pids: int, guard_s: float = GUARD_S) -> FakeClock:
    """The clock for ``clean_up``: it moves only once every one of ``pids`` is gone (waited for, up to ``guard_s``),
    so the runner's own teardown and a leftover's exit on SIGTERM never spend a grace on a loaded machine. A process
    that is never stopped meets its SIGKILL once the guard has given up (once: the clock then moves freely), and the
    test sees that."""
    processes = [psutil.Process(pid) for pid in pids]
    gave_up: list[bool] = []

    def settle() -> None:
        if not gave_up and not eventually(lambda: not any(is_alive(p) for p in processes), guard_s):
            gave_up.append(True)

    return FakeClock(settle=settle)


def test_nothing_recorded_is_nothing_to_clean(tmp_path):
    assert clean_up(tmp_path) == [CheckRecord("run", Status.PASSED, f"no run record in {tmp_path}: nothing to clean")]


def test_leftovers_of_a_killed_run_are_ended_and_the_machine_verified(tmp_path, run_id, spawn):
    port = UNIT_PORT_BASE + 40
    layout = RunLayout.for_run(tmp_path, run_id)
    record = RunRecord.start(
        layout, run_id, stand_in_plan(stand_in_case("c", SLEEPER, port=port)), GpuSnapshot(unavailable="no NVML"), set()
    )
    leftover = spawn(SLEEPER, case_id="c")
    record.add_process("c", "server", leftover.pid)
    (layout.case_scratch("c")).mkdir(parents=True)
    (layout.case_scratch("c") / "vllm_dist_abc").write_text("")
    wait_for_log(leftover.log_path, "stand-in up")
    clock = once_gone(leftover.pid)

    checks = clean_up(tmp_path, clock=clock, sleep=clock.sleep)

    assert statuses(checks) == {
        "runner": "passed",
        "leftovers": "warned",
        "processes": "passed",
        "ports": "passed",
        "gpu_memory": "skipped",
        "leftover_files": "passed",
    }
    assert f"pid {leftover.pid}" in checks[1].detail
    assert leftover.popen.wait(timeout=GUARD_S) == -signal.SIGTERM  # gone already: cleanup waited for it
    assert not layout.scratch_root.exists()
    again = statuses(clean_up(tmp_path))
    assert "leftovers" not in again and again["processes"] == "passed"


def test_a_port_still_held_fails_the_cleanup(tmp_path, run_id):
    port = UNIT_PORT_BASE + 41
    RunRecord.start(
        RunLayout.for_run(tmp_path, run_id),
        run_id,
        stand_in_plan(stand_in_case("c", SLEEPER, port=port)),
        GpuSnapshot(unavailable="no NVML"),
        set(),
    )
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        clock = FakeClock()
        checks = clean_up(tmp_path, clock=clock, sleep=clock.sleep)

    assert statuses(checks)["ports"] == Status.FAILED
    assert clock.elapsed >= PORT_SETTLE_S  # it gave the port its settle time (on the clock given) first


def test_a_runner_still_alive_is_stopped_through_its_own_cancel_path(tmp_path):
    """A real `afd-e2e run` of a stand-in, then cleanup from outside: the runner tears down and writes results."""
    runner = _start_stand_in_run(tmp_path, UNIT_PORT_BASE + 42)
    record_path = tmp_path / "run-record.json"
    run_id = json.loads(record_path.read_text())["run_id"]
    clock = once_gone(runner.pid, guard_s=RUNNER_GUARD_S)

    checks = clean_up(tmp_path, clock=clock, sleep=clock.sleep)

    assert statuses(checks)["runner"] == Status.WARNED
    assert checks[0].detail.endswith("stopped with SIGTERM")  # its own teardown ended it, no SIGKILL
    assert runner.wait(timeout=GUARD_S) == 1  # gone already (a zombie until this test, its parent, reaps it)
    assert json.loads((tmp_path / "results.json").read_text())["status"] == "cancelled"
    assert find_marked(run_id) == []
    assert statuses(checks)["processes"] == Status.PASSED


def test_the_cleanup_command_reports_each_check_and_exits_zero_when_clean(tmp_path, capsys):
    assert main(["cleanup", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"cleanup run: passed - no run record in {tmp_path}: nothing to clean\n"


def test_within_a_budget_a_server_ignoring_sigterm_is_killed_before_the_deadline(tmp_path, run_id, spawn, monkeypatch):
    """A cancelled job's grace period: the waits shrink so the SIGKILL and the checks fit the seconds left on the
    clock given (a FakeClock that moves only as the cleanup's own waits sleep on it)."""
    port = UNIT_PORT_BASE + 43
    layout = RunLayout.for_run(tmp_path, run_id)
    record = RunRecord.start(
        layout, run_id, stand_in_plan(stand_in_case("c", SLEEPER, port=port)), GpuSnapshot(unavailable="no NVML"), set()
    )
    stubborn = spawn(IGNORES_SIGTERM, case_id="c")
    record.add_process("c", "server", stubborn.pid)
    wait_for_log(stubborn.log_path, "ignoring SIGTERM")

    graces = []

    def recorded(find, grace_s, **kwargs):
        graces.append(grace_s)
        return terminate(find, grace_s, **kwargs)

    monkeypatch.setattr("afd_e2e.runner.cleanup.terminate", recorded)
    killed = psutil.Process(stubborn.pid)
    clock = FakeClock(settle=lambda: clock.elapsed < 0.8 or eventually(lambda: not is_alive(killed)))
    checks = clean_up(tmp_path, within_s=2.0, clock=clock, sleep=clock.sleep)

    assert graces == [0.4 * 2.0]  # the SIGKILL came after 0.8 s of the 2 s, not after CANCEL_GRACE_S
    assert CANCEL_GRACE_S > 0.8
    assert clock.elapsed < 2.0  # and every wait after it (ports, GPU) still fitted in what was left
    assert statuses(checks)["processes"] == "passed"
    assert "some needed SIGKILL" in checks[1].detail
    assert stubborn.popen.wait(timeout=30) == -signal.SIGKILL


def _start_stand_in_run(out: Path, port: int) -> subprocess.Popen:
    """A real runner of one stand-in case that never becomes ready, once it has launched its server."""
    script = Path(__file__).with_name("stand_in_run.py")
    runner = subprocess.Popen(
        [sys.executable, str(script), str(out), str(port)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        stdout=subprocess.DEVNULL,
    )
    record_path = out / "run-record.json"
    wait_until(
        lambda: record_path.exists() and json.loads(record_path.read_text())["processes"],
        RUNNER_GUARD_S,
        what="the stand-in's launch",
    )
    return runner


def test_a_run_whose_runner_was_killed_is_closed_as_interrupted_and_reported_so(tmp_path):
    runner = _start_stand_in_run(tmp_path, UNIT_PORT_BASE + 46)
    runner.kill()  # SIGKILL: no teardown, no last write; results.json still says running
    runner.wait(timeout=30)
    assert load_results(tmp_path).status is Status.RUNNING

    checks = clean_up(tmp_path)

    closed = next(c for c in checks if c.check == "results")
    assert closed.status is Status.WARNED and closed.detail.startswith("results.json marked interrupted: the runner")
    results = load_results(tmp_path)
    assert results.status is Status.INTERRUPTED and results.verdict.status is Status.INTERRUPTED
    assert results.interruption is not None and results.interruption.found_at
    assert f"(pid {runner.pid}) had exited while results.json still said running" in results.interruption.how
    assert results.cases["c"].status is Status.INTERRUPTED
    assert results.verdict.reasons[0].startswith("run interrupted: the runner of run ")
    assert statuses(checks)["processes"] == "passed"  # its orphaned server was ended
    assert main(["report", str(tmp_path)]) == 0
    annotation = (tmp_path / "annotation.md").read_text(encoding="utf-8")
    assert annotation.startswith("## ⚠️ SMOKE afd-e2e tiny\\-cpu: interrupted: the runner vanished before its verdict")
    assert "> **Interrupted**: the runner of run" in annotation
    assert "Did not finish: <code>c</code>" in annotation
    verdict = assert_valid_junit(next((tmp_path / "junit").glob("*.xml")))
    assert verdict.get("errors") != "0"


def test_cleanup_after_a_finished_run_leaves_its_results_alone(tmp_path):
    runner = _start_stand_in_run(tmp_path, UNIT_PORT_BASE + 47)
    clock = once_gone(runner.pid, guard_s=RUNNER_GUARD_S)
    clean_up(tmp_path, clock=clock, sleep=clock.sleep)  # stops the live runner, which writes its own cancelled results
    runner.wait(timeout=30)
    before = (tmp_path / "results.json").read_text()

    assert all(c.check != "results" for c in clean_up(tmp_path))
    assert (tmp_path / "results.json").read_text() == before and load_results(tmp_path).status is Status.CANCELLED
