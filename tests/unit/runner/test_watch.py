"""Unit tier: the engine watch on stand-in roles: a dead engine behind a live API process (503 on /health), a process that
exits 0, a fatal log line; the root-cause line quoted from the role's log, never vLLM's generic wrapper."""

from __future__ import annotations

import dataclasses
import http.server
import threading
from pathlib import Path

import pytest
from stand_ins import UNIT_PORT_BASE, on_release, wait_for_log

from afd_e2e.runner.watch import (
    LOG_SETTLE_S,
    REFUSED_FOR_S,
    EngineDied,
    EngineWatch,
    HealthProbe,
    LogScanner,
    fatal_marker,
    root_cause,
)
from unit.timing import GUARD_S, FakeClock, wait_until

PORT = UNIT_PORT_BASE + 50
HEALTH = f"http://127.0.0.1:{PORT}/health"


def dead_engine_api_alive(release: Path) -> str:
    """An API server whose engine dies once the test releases it: the engine's traceback lands in the log the way
    vLLM's EngineCore writes it (prefixed lines, then the wrapper; one write), and only then does /health turn 503,
    while the process stays up."""
    return f"""
import http.server, pathlib, threading, time
dead = False
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(503 if dead else 200); self.end_headers()
    def log_message(self, *args):
        pass
def engine():
    global dead
    while not pathlib.Path({str(release)!r}).exists():
        time.sleep(0.01)
    print("\\n".join((
        "(EngineCore_DP0 pid=7) ERROR 11-29 20:26:06 [core.py:1] EngineCore encountered a fatal error.",
        "(EngineCore_DP0 pid=7) ERROR 11-29 20:26:06 [core.py:1] Traceback (most recent call last):",
        "(EngineCore_DP0 pid=7) ERROR 11-29 20:26:06 [core.py:1]   File \\"x.py\\", line 1, in forward",
        "(EngineCore_DP0 pid=7) ERROR 11-29 20:26:06 [core.py:1] ValueError: Unknown routing strategy: x",
        "(APIServer pid=6) ERROR 11-29 20:26:07 [async_llm.py:1] vllm.v1.engine.exceptions.EngineDeadError: "
        "EngineCore encountered an issue. See stack trace (above) for the root cause.",
    )), flush=True)
    dead = True
threading.Thread(target=engine, daemon=True).start()
print("api up", flush=True)
http.server.HTTPServer(("127.0.0.1", {PORT}), Handler).serve_forever()
"""


def up_then_exits_0(release: Path) -> str:
    return on_release(release) + "print('shutting down cleanly', flush=True)"


def logs_oom(release: Path) -> str:
    return on_release(release) + (
        "print('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB', flush=True); time.sleep(600)"
    )


@pytest.fixture
def release(tmp_path) -> Path:
    """The file whose creation lets a stand-in act (stand_ins.on_release)."""
    return tmp_path / "release"


def wait_for_death(watch: EngineWatch):
    assert watch.dead.wait(GUARD_S), "the watch saw no death"
    with pytest.raises(EngineDied) as caught:
        watch.check()
    watch.stop()
    return caught.value.death


def first_200(watch: EngineWatch) -> None:
    (role,) = watch._roles
    wait_until(lambda: role.health.healthy, what="the watch's first 200 from /health")


def test_a_dead_engine_behind_a_live_api_process_is_named_with_its_root_cause(spawn, release):
    server = spawn(dead_engine_api_alive(release), name="ffn")
    wait_for_log(server.log_path, "api up")
    watch = EngineWatch([(server, HEALTH)]).start()
    first_200(watch)  # healthy first: what follows is a death, not a server that never came up

    release.touch()
    death = wait_for_death(watch)

    assert server.exit_code() is None  # the API process is still alive
    assert death.role == "ffn" and death.exit_code is None
    assert death.sign in ("/health answered 503", "log: EngineCore fatal error", "log: error in an engine core process")
    assert death.cause == "ValueError: Unknown routing strategy: x"
    assert death.describe("start-up").startswith("ffn engine died during start-up (")
    assert death.describe("start-up").endswith("): ValueError: Unknown routing strategy: x")


def test_a_process_that_exits_0_while_watched_is_a_death(spawn, release):
    server = spawn(up_then_exits_0(release))
    watch = EngineWatch([(server, HEALTH)]).start()
    release.touch()  # it exits once watched

    death = wait_for_death(watch)

    assert (death.exit_code, death.sign, death.cause) == (0, "exited with code 0", "shutting down cleanly")
    assert death.describe("smoke").startswith("server exited with code 0 during smoke, ")


def test_a_fatal_log_line_is_a_death_even_while_the_process_and_port_look_fine(spawn, release):
    server = spawn(logs_oom(release), name="attention")
    watch = EngineWatch([(server, HEALTH)]).start()
    release.touch()  # its log line comes once the watch reads the log

    death = wait_for_death(watch)

    assert server.exit_code() is None  # the process looks fine: only its log says it died
    assert (death.role, death.sign) == ("attention", "log: CUDA out of memory")
    assert death.cause == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def test_a_healthy_role_is_no_death(spawn, release):
    server = spawn(dead_engine_api_alive(release))  # never released: its engine lives
    wait_for_log(server.log_path, "api up")
    watch = EngineWatch([(server, HEALTH)]).start()
    first_200(watch)
    watch.check()  # raises nothing
    watch.stop()
    assert watch.death is None


@pytest.mark.parametrize(
    ("line", "label"),
    [
        ("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.", "EngineDeadError"),
        (
            "(EngineCore_DP0 pid=1) ERROR 11-29 20:26:06 [core.py:1] EngineCore encountered a fatal error.",
            "EngineCore fatal error",
        ),
        (
            "(APIServer pid=8) WARNING [core_client.py:817] [shutdown] MPClient: engine core exited unexpectedly",
            "engine core died",
        ),
        (
            "(APIServer pid=8) ERROR [utils.py:1] Engine core proc EngineCore_DP0 died unexpectedly, shutting down",
            "engine core died",
        ),
        ("(EngineCore_DP0 pid=1) Traceback (most recent call last):", "error in an engine core process"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate", "CUDA out of memory"),
        ("RuntimeError: NCCL error in: ../nccl.cpp:1, unhandled cuda error", "NCCL error"),
        ("torch.distributed.DistBackendError: ncclUnhandledCudaError: Call to CUDA function failed.", "NCCL error"),
    ],
)
def test_fatal_markers(line, label):
    assert fatal_marker(line) == label


@pytest.mark.parametrize(
    "line",
    [
        "(APIServer pid=8) WARNING [system_utils.py:255] fd limit errors like `OSError: [Errno 24] Too many open files`",
        "(EngineCore pid=9) INFO 11-30 15:25:10 [core.py:133] Initializing a V1 LLM engine",
        "(EngineCore pid=9) WARNING 11-30 15:24:31 [vllm.py:1703] Enforce eager set, disabling torch.compile",
        'INFO:     127.0.0.1:36374 - "POST /v1/completions HTTP/1.1" 200 OK',
    ],
)
def test_lines_of_a_healthy_server_are_not_fatal(line):
    assert fatal_marker(line) is None


def test_the_root_cause_prefers_the_specific_exception_then_the_first_marker():
    assert root_cause("") == ""
    wrapper = "(APIServer pid=6) ERROR 11-30 15:32:13 [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."
    first = "(APIServer pid=6) WARNING 11-30 15:32:13 [core_client.py:817] [shutdown] MPClient: engine core exited unexpectedly; starting cleanup"
    assert (
        root_cause(f"{first}\n{wrapper}\n") == "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup"
    )
    specific = "(EngineCore_DP0 pid=7) ERROR 11-30 15:32:12 [core.py:1] KeyError: 'experts'"
    assert root_cause(f"{specific}\n{first}\n{wrapper}\n") == "KeyError: 'experts'"
    assert root_cause("loading weights\nvllm serve: error: unrecognized arguments: --x\n") == (
        "vllm serve: error: unrecognized arguments: --x"
    )


def test_the_log_scanner_reads_only_new_lines_and_waits_for_a_line_to_end(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("EngineDeadError: old\n")
    scanner = LogScanner(log)
    assert scanner.fatal() == "EngineDeadError"
    assert scanner.fatal() is None  # already read
    with log.open("a") as handle:
        handle.write("\x1b[1;31mtorch.OutOfMemoryError: CUDA out of")
    assert scanner.fatal() is None  # half a line
    with log.open("a") as handle:
        handle.write(" memory\x1b[0m\n")
    assert scanner.fatal() == "CUDA out of memory"


def test_refused_connections_are_a_death_once_refused_for_their_time_on_the_clock():
    """REFUSED_FOR_S is read on the watch's clock: the test moves it, so no real second is waited or raced."""

    class Healthy(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Healthy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    clock = FakeClock()
    probe = HealthProbe(f"http://127.0.0.1:{server.server_address[1]}/health", clock)
    assert probe.sign_of_death() is None and probe.healthy
    server.shutdown()
    server.server_close()  # the port now refuses connections

    assert probe.sign_of_death() is None  # refused since now
    clock.advance(REFUSED_FOR_S - 0.1)
    assert probe.sign_of_death() is None
    clock.advance(0.1)
    assert probe.sign_of_death() == "/health stopped accepting connections"


@dataclasses.dataclass
class LoggingRole:
    """What the watch reads of a local role, without a process: alive, writing ``log_path``."""

    name: str
    log_path: Path
    launched_at: float = 0.0

    def exit_code(self) -> int | None:
        return None


def test_a_death_seen_in_the_log_waits_for_its_traceback_with_the_watchs_sleep(tmp_path):
    """LOG_SETTLE_S is waited with the watch's ``sleep``: the traceback written meanwhile (by the clock's
    ``settle``, before the clock moves) is the cause quoted, and the wait is the clock's, not a real 0.3 s."""
    log = tmp_path / "attention.log"
    log.write_text("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.\n")

    def traceback_arrives() -> None:
        with log.open("a") as handle:
            handle.write("(EngineCore_DP0 pid=7) ERROR 11-30 15:32:12 [core.py:1] KeyError: 'experts'\n")

    clock = FakeClock(settle=traceback_arrives)
    roles = [(LoggingRole("attention", log), "http://127.0.0.1:9/health")]
    watch = EngineWatch(roles, clock=clock, sleep=clock.sleep).start()  # type: ignore[arg-type]

    death = wait_for_death(watch)

    assert (death.sign, death.cause) == ("log: EngineDeadError", "KeyError: 'experts'")
    assert clock.sleeps == [LOG_SETTLE_S]
