"""Unit tier: whole runs of stand-in processes: results written as they go, cancel, SIGKILL escalation, harness
crashes. Each budget or stall is proven by the verdict naming it (not by how long it took: benchmarks/lifecycle.py
measures that on the real engine)."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import shutil
import threading
from pathlib import Path

import psutil
import pytest
from stand_ins import IGNORES_SIGTERM, SLEEPER, UNIT_PORT_BASE, api_stand_in, stand_in_case, stand_in_plan

from afd_e2e.profile import load_profile
from afd_e2e.results.status import Status
from afd_e2e.results.store import results_to_json
from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.run import execute_run
from afd_e2e.runner.teardown import POLL_INTERVAL_S, terminate
from afd_e2e.system.markers import find_marked, is_alive
from afd_e2e.system.progress import Progress
from unit.timing import FakeClock, eventually, wait_until

PROFILE = load_profile("tiny-cpu")


@pytest.fixture
def no_wind_down(monkeypatch):
    """The abandoned smoke's request to a hung stand-in ends only once the teardown closes its connection: the
    wind-down that abandoned work gets (STOP_JOIN_S, for a bench subprocess to end) would only be waited out."""
    monkeypatch.setattr("afd_e2e.runner.cancellation.STOP_JOIN_S", 0.0)


def quiet() -> Progress:
    return Progress(stream=io.StringIO())


def read_results(out):
    return json.loads((out / "results.json").read_text())


def run_id_of(out) -> str:
    return json.loads((out / "run-record.json").read_text())["run_id"]


@dataclasses.dataclass
class Teardowns:
    """What ``teardown_on_a_fake_clock`` saw: each teardown's grace and the tree it found, and their clock."""

    clock: FakeClock
    graces: list[float] = dataclasses.field(default_factory=list)
    trees: list[list[psutil.Process]] = dataclasses.field(default_factory=list)
    gave_up: bool = False  # a tree that was not gone within GUARD_S


def teardown_on_a_fake_clock(monkeypatch, *, ignores_sigterm: bool = False) -> Teardowns:
    """Every case teardown's grace read on one FakeClock that only the teardown's own polls move, each once the tree
    it found is gone (waited for, bounded by GUARD_S): a server that exits on SIGTERM is never SIGKILLed because a
    loaded machine ran it late. With ``ignores_sigterm`` the clock moves freely until the grace is out (the server
    will not go on SIGTERM), then once the SIGKILLed tree is gone. A teardown that sent no SIGTERM meets its SIGKILL
    once the guard has given up (once: the clock then moves freely), and the test sees it."""

    def settle() -> None:
        if seen.gave_up or (ignores_sigterm and seen.clock.elapsed < seen.graces[-1]):
            return
        seen.gave_up = not eventually(lambda: not any(is_alive(p) for p in seen.trees[-1]))

    seen = Teardowns(FakeClock(settle=settle))

    def on_the_clock(find, grace_s, **kwargs):
        seen.graces.append(grace_s)
        seen.trees.append([m.process for m in find()])
        return terminate(find, grace_s, **kwargs, clock=seen.clock, sleep=seen.clock.sleep)

    monkeypatch.setattr("afd_e2e.runner.server.terminate", on_the_clock)
    return seen


def test_cancel_mid_startup_stops_everything_and_writes_cancelled_results(tmp_path, monkeypatch):
    teardown_on_a_fake_clock(monkeypatch)  # its hygiene says SIGTERM sufficed: a slow exit must not turn to SIGKILL
    plan = stand_in_plan(
        stand_in_case("first", SLEEPER, port=UNIT_PORT_BASE + 30),
        stand_in_case("second", SLEEPER, port=UNIT_PORT_BASE + 31),
    )
    flag = CancelFlag()
    seen_mid_run = {}

    def launched():
        if not (tmp_path / "results.json").exists():
            return False
        data = read_results(tmp_path)
        if data["cases"].get("first", {}).get("processes"):
            seen_mid_run.update(data)
            return True
        return False

    def cancel_once_launched():
        eventually(launched)
        flag.cancel("cancelled by SIGTERM")

    threading.Thread(target=cancel_once_launched).start()
    data = results_to_json(execute_run(PROFILE, plan, tmp_path, progress=quiet(), flag=flag))

    assert seen_mid_run["status"] == "running"  # results.json was valid while the case was starting
    assert seen_mid_run["cases"]["first"]["status"] == "running"
    # cancelled, not failed at the end of its start-up budget: the cancel stopped the wait
    assert read_results(tmp_path) == json.loads(json.dumps(data))
    assert data["status"] == "cancelled"
    assert data["verdict"]["reasons"][0] == "run cancelled by SIGTERM"
    first = data["cases"]["first"]
    assert first["status"] == "cancelled"
    assert first["processes"][0]["exit_code"] == -15
    assert {c["check"]: c["status"] for c in first["hygiene"]} == {
        "processes": "passed",
        "forced_kill": "passed",
        "ports": "passed",
        "gpu_memory": "skipped",
        "leftover_files": "passed",
    }
    assert data["cases"]["second"]["status"] == "cancelled"
    assert data["cases"]["second"]["failure"] == "run cancelled before it began"
    assert find_marked(run_id_of(tmp_path)) == []


def test_a_server_ignoring_sigterm_is_killed_and_fails_its_case(tmp_path, monkeypatch):
    """The start-up budget runs out on the run's clock (run_clock), then the teardown's grace is read on a FakeClock
    that moves only as the teardown's own polls sleep on it (and, once the grace is out, only after the SIGKILLed
    server is gone): the SIGKILL comes when that clock says the grace ran out, however slow the machine."""
    case = stand_in_case("stubborn", IGNORES_SIGTERM, port=UNIT_PORT_BASE + 32, startup_timeout_s=1.0)
    startup = run_clock(tmp_path, "stubborn", "ignoring SIGTERM")  # its 1 s start-up budget
    teardowns = teardown_on_a_fake_clock(monkeypatch, ignores_sigterm=True)
    run = execute_run(PROFILE, stand_in_plan(case), tmp_path, progress=quiet(), clock=startup, sleep=startup.sleep)
    data = results_to_json(run)

    result = data["cases"]["stubborn"]
    assert result["status"] == "failed"
    assert result["failure"] == (
        "http://127.0.0.1:19432/v1/models did not answer 200 within its start-up budget (budgets.startup_s = 1 s)"
    )
    assert result["log_tail"] == "ignoring SIGTERM"
    assert result["processes"][0]["forced_kill"] is True
    assert result["processes"][0]["exit_code"] == -9
    hygiene = {c["check"]: c for c in result["hygiene"]}
    assert hygiene["forced_kill"]["status"] == "failed"
    assert hygiene["forced_kill"]["detail"] == "SIGKILL needed for server: still running 1 s after SIGTERM"
    # one teardown of the one server, with the case's 1 s grace
    assert teardowns.graces == [1.0] and len(teardowns.trees[0]) == 1
    # the SIGKILL came when the grace ran out on the clock given, and the teardown returned at its next looks
    assert 1.0 <= result["timings"]["teardown_s"] <= 1.0 + 3 * POLL_INTERVAL_S
    assert result["timings"]["teardown_s"] == round(teardowns.clock.elapsed, 3)
    assert data["status"] == "failed"
    assert find_marked(run_id_of(tmp_path)) == []


def test_a_harness_crash_still_tears_down_and_records_it(tmp_path, monkeypatch):
    from afd_e2e.runner import server as server_module

    teardown_on_a_fake_clock(monkeypatch)  # exit code -15: SIGTERM ended it, however late it ran

    def broken_wait(*_args, **_kwargs):
        raise RuntimeError("poller bug")

    monkeypatch.setattr(server_module, "wait_until_ready", broken_wait)
    case = stand_in_case("crashy", SLEEPER, port=UNIT_PORT_BASE + 33)

    data = results_to_json(execute_run(PROFILE, stand_in_plan(case), tmp_path, progress=quiet()))

    result = data["cases"]["crashy"]
    assert result["status"] == "crashed"
    assert result["failure"] == "harness error: RuntimeError: poller bug"
    assert result["processes"][0]["exit_code"] == -15
    assert data["status"] == "crashed"
    assert find_marked(run_id_of(tmp_path)) == []


def test_the_run_folder_holds_logs_and_record_and_no_scratch_is_left(tmp_path):
    case = stand_in_case("short", "print('hello from the stand-in')", port=UNIT_PORT_BASE + 34)

    data = results_to_json(execute_run(PROFILE, stand_in_plan(case), tmp_path, progress=quiet()))

    result = data["cases"]["short"]
    assert result["failure"].startswith("server exited with code 0 during start-up, ")
    assert result["log_tail"] == "hello from the stand-in"
    assert (tmp_path / result["processes"][0]["log"]).read_text() == "hello from the stand-in\n"
    record = json.loads((tmp_path / "run-record.json").read_text())
    assert record["processes"] == [{"case": "short", "name": "server", "pid": result["processes"][0]["pid"]}]
    assert not (tmp_path.parent / record["scratch_root"]).exists()


def test_an_executable_that_cannot_start_fails_its_case(tmp_path):
    not_a_program = tmp_path / "vllm"
    not_a_program.write_bytes(b"\x00\x01 not a program")
    not_a_program.chmod(0o755)
    case = stand_in_case("unstartable", SLEEPER, port=UNIT_PORT_BASE + 35)
    process = dataclasses.replace(case.processes[0], argv=(str(not_a_program), "serve"))
    case = dataclasses.replace(case, processes=(process,))

    data = results_to_json(execute_run(PROFILE, stand_in_plan(case), tmp_path / "out", progress=quiet()))

    result = data["cases"]["unstartable"]
    assert result["status"] == "failed"
    assert result["failure"].startswith("cannot start server: [Errno 8] Exec format error")
    assert result["processes"] == []


def with_budgets(**seconds: float):
    return dataclasses.replace(PROFILE, budgets=PROFILE.budgets.replaced(**seconds))


def run_clock(out, case_id: str, moves_once: str, cap_s: float = 3.0) -> FakeClock:
    """The run's clock (start-up and phase budgets, telemetry samples, timings), moved only by the sampler's waits
    (1 s a sample): not before ``moves_once`` is in the stand-in's log (its completion has arrived, it ignores
    SIGTERM) and the stand-in sleeps, so a slow start on a loaded machine is neither budget nor quiet time; and no
    more than ``cap_s`` past that until the case's failure is on record, so the watcher judges the moment the test
    means (a stall, a budget) however late its thread runs. Pass it as ``execute_run(clock=clock, sleep=clock.sleep)``."""
    moved_from: list[float] = []

    def logged() -> bool:
        return any(moves_once in log.read_text() for log in out.rglob("server.log"))

    def failure_on_record() -> bool:
        try:
            return bool(read_results(out)["cases"][case_id]["failure"])
        except (OSError, ValueError, KeyError):
            return False

    def asleep() -> bool:  # quiet after logging it: the state a diagnosis names is the stand-in's settled one
        try:
            pid = read_results(out)["cases"][case_id]["processes"][0]["pid"]
            return psutil.Process(pid).status() == psutil.STATUS_SLEEPING
        except (OSError, ValueError, KeyError, IndexError, psutil.Error):
            return False

    def settle() -> None:
        if not moved_from:
            eventually(logged)
            eventually(asleep)
            moved_from.append(clock.now)
        if clock.now - moved_from[0] >= cap_s:
            eventually(failure_on_record)

    clock = FakeClock(settle=settle)
    return clock


def test_a_phase_past_its_budget_fails_the_case_naming_the_budget(tmp_path, no_wind_down):
    port = UNIT_PORT_BASE + 36
    case = stand_in_case("slow", api_stand_in(port), port=port)
    clock = run_clock(tmp_path, "slow", "completion arrived")

    data = execute_run(
        with_budgets(smoke_s=1.0), stand_in_plan(case), tmp_path, progress=quiet(), clock=clock, sleep=clock.sleep
    )

    result = data.cases["slow"]
    assert result.status is Status.FAILED
    # the watchdog's diagnosis follows: the stand-in's completion hangs with its request in flight
    assert result.failure.startswith("smoke ran past its budget (budgets.smoke_s = 1 s); 1 requests in flight, ")
    assert re.search(r"no token for \d+ s; server \S+ pid \d+ is sleeping", result.failure), result.failure
    assert result.timings.phases["smoke"] >= 1.0  # it ran until the budget was out, then stopped
    assert find_marked(run_id_of(tmp_path)) == []


def test_an_engine_dying_mid_phase_fails_the_case_at_once_and_the_phase_can_no_longer_write(tmp_path, no_wind_down):
    port = UNIT_PORT_BASE + 37
    case = stand_in_case("dies", api_stand_in(port, dies_at_first_completion=True), port=port)

    data = execute_run(PROFILE, stand_in_plan(case), tmp_path, progress=quiet())

    result = data.cases["dies"]
    assert result.status is Status.FAILED
    assert result.failure.startswith("server engine died during smoke (/health answered 503, "), result.failure
    # a death, not the end of the smoke budget (the profile's, minutes); how soon: benchmarks/lifecycle.py
    wait_until(
        lambda: not any(t.name == "afd-e2e-work" for t in threading.enumerate()),
        what="the abandoned smoke request's end",
    )  # it has failed by now (its server is gone) and tried to write
    assert read_results(tmp_path)["cases"]["dies"].get("smoke") is None
    assert data.cases["dies"].section("smoke") is None
    assert find_marked(run_id_of(tmp_path)) == []


def test_a_sigkill_needed_during_a_cancel_is_a_labelled_warning_not_a_hygiene_failure(tmp_path, monkeypatch):
    """The teardown's 1 s grace is read on a FakeClock that its own polls move, once the grace is out only after
    the SIGKILLed server is gone (as in the test above)."""
    case = stand_in_case("loading", IGNORES_SIGTERM, port=UNIT_PORT_BASE + 38)  # like vLLM while it loads
    flag = CancelFlag()
    teardowns = teardown_on_a_fake_clock(monkeypatch, ignores_sigterm=True)

    def cancel_once_loading():
        eventually(lambda: any("ignoring SIGTERM" in p.read_text() for p in tmp_path.rglob("*.log")))
        flag.cancel("cancelled by SIGTERM")

    threading.Thread(target=cancel_once_loading).start()

    data = execute_run(PROFILE, stand_in_plan(case), tmp_path, progress=quiet(), flag=flag)

    result = data.cases["loading"]
    assert result.status is Status.CANCELLED and data.status is Status.CANCELLED
    assert result.processes[0].forced_kill is True
    forced = next(c for c in result.hygiene if c.check == "forced_kill")
    assert forced.status is Status.WARNED
    assert forced.detail == (
        "cancel escalated to SIGKILL for server: still running 1 s after SIGTERM (vLLM ignores SIGTERM while loading)"
    )
    assert not any(c.status is Status.FAILED for c in result.hygiene)
    assert find_marked(run_id_of(tmp_path)) == []
    # the SIGKILL came when the grace ran out on that clock
    assert 1.0 <= teardowns.clock.elapsed <= 1.0 + 3 * POLL_INTERVAL_S


def test_a_stall_fails_the_case_and_keep_on_stall_leaves_its_processes_up(tmp_path, no_wind_down):
    port = UNIT_PORT_BASE + 38
    first = stand_in_case("hangs", api_stand_in(port), port=port)  # its completion never answers: one in flight
    second = stand_in_case("after", SLEEPER, port=port + 1)
    progress = Progress(stream=io.StringIO())
    clock = run_clock(tmp_path, "hangs", "completion arrived")

    data = execute_run(
        with_budgets(stall_s=1.0),
        stand_in_plan(first, second),
        tmp_path,
        progress=progress,
        keep_on_stall=True,
        clock=clock,
        sleep=clock.sleep,
    )
    try:
        result = data.cases["hangs"]
        assert result.status is Status.FAILED
        # a stall (stall_s), not the smoke budget; how soon on a real engine: benchmarks/lifecycle.py hang-to-verdict
        assert result.failure.startswith("engine stalled during smoke: 1 requests in flight, no token for 1 s")
        assert [s.kept for s in result.section("telemetry").stalls] == [True]
        assert data.cases["after"].status is Status.SKIPPED  # the run ends after the kept case
        assert data.cases["after"].failure == "not run: case hangs's stalled processes were kept up (--keep-on-stall)"
        kept = find_marked(run_id_of(tmp_path))
        assert [m.name for m in kept] == ["server"]
        printed = progress.stream.getvalue()
        assert f"pid {kept[0].process.pid}" in printed and f"py-spy dump --pid {kept[0].process.pid}" in printed
        scratch = Path(json.loads((tmp_path / "run-record.json").read_text())["scratch_root"])
        assert (scratch / "hangs").is_dir()  # kept for the kept processes, which use it; `afd-e2e cleanup` removes it
    finally:
        terminate(lambda: find_marked(run_id_of(tmp_path)), 1.0)
        shutil.rmtree(json.loads((tmp_path / "run-record.json").read_text())["scratch_root"], ignore_errors=True)


def test_without_keep_on_stall_a_stalled_case_is_torn_down_and_the_next_one_runs(tmp_path, no_wind_down):
    port = UNIT_PORT_BASE + 39
    plan = stand_in_plan(stand_in_case("hangs", api_stand_in(port), port=port))
    clock = run_clock(tmp_path, "hangs", "completion arrived")

    data = execute_run(with_budgets(stall_s=1.0), plan, tmp_path, progress=quiet(), clock=clock, sleep=clock.sleep)

    result = data.cases["hangs"]
    assert result.failure.startswith("engine stalled during smoke: ")
    assert [s.kept for s in result.section("telemetry").stalls] == [False]
    assert find_marked(run_id_of(tmp_path)) == []
