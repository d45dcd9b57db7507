"""The engine watch on stand-in roles: a dead engine behind a live API process (503 on /health), a process that
exits 0, a fatal log line; the root-cause line quoted from the role's log, never vLLM's generic wrapper."""

from __future__ import annotations

import pytest
from stand_ins import UNIT_PORT_BASE, wait_for_log

from afd_e2e.runner.watch import EngineDied, EngineWatch, LogScanner, fatal_marker, root_cause
from unit.timing import wait_until

PORT = UNIT_PORT_BASE + 50
HEALTH = f"http://127.0.0.1:{PORT}/health"
# An API server whose engine dies 0.5 s after it first answers: /health turns 503, the process stays up, and the
# engine's traceback lands in the log the way vLLM's EngineCore writes it (prefixed lines, then the wrapper).
DEAD_ENGINE_API_ALIVE = f"""
import http.server, threading, time
started = None
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global started
        started = started or time.monotonic()
        dead = time.monotonic() - started > 0.5
        self.send_response(503 if dead else 200); self.end_headers()
    def log_message(self, *args):
        pass
def engine():
    while started is None or time.monotonic() - started < 0.5:
        time.sleep(0.01)
    for line in ("(EngineCore_DP0 pid=7) ERROR 11-29 20:26:06 [core.py:1] EngineCore encountered a fatal error.",
                 "(EngineCore_DP0 pid=7) ERROR 11-29 20:26:06 [core.py:1] Traceback (most recent call last):",
                 "(EngineCore_DP0 pid=7) ERROR 11-29 20:26:06 [core.py:1]   File \\"x.py\\", line 1, in forward",
                 "(EngineCore_DP0 pid=7) ERROR 11-29 20:26:06 [core.py:1] ValueError: Unknown routing strategy: x",
                 "(APIServer pid=6) ERROR 11-29 20:26:07 [async_llm.py:1] vllm.v1.engine.exceptions.EngineDeadError: "
                 "EngineCore encountered an issue. See stack trace (above) for the root cause."):
        print(line, flush=True)
threading.Thread(target=engine, daemon=True).start()
print("api up", flush=True)
http.server.HTTPServer(("127.0.0.1", {PORT}), Handler).serve_forever()
"""
UP_THEN_EXITS_0 = "import time; print('shutting down cleanly', flush=True); time.sleep(0.3)"
LOGS_OOM = (
    "import time; time.sleep(0.2); "
    "print('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB', flush=True); time.sleep(600)"
)


def wait_for_death(watch: EngineWatch, within_s: float):
    assert watch.dead.wait(within_s), "the watch saw no death"
    with pytest.raises(EngineDied) as caught:
        watch.check()
    watch.stop()
    return caught.value.death


def test_a_dead_engine_behind_a_live_api_process_is_named_with_its_root_cause(spawn):
    server = spawn(DEAD_ENGINE_API_ALIVE, name="ffn")
    wait_for_log(server.log_path, "api up")
    watch = EngineWatch([(server, HEALTH)]).start()

    death = wait_for_death(watch, 5.0)

    assert server.exit_code() is None  # the API process is still alive
    assert death.role == "ffn" and death.exit_code is None
    assert death.sign in ("/health answered 503", "log: EngineCore fatal error", "log: error in an engine core process")
    assert death.cause == "ValueError: Unknown routing strategy: x"
    assert death.describe("start-up").startswith("ffn engine died during start-up (")
    assert death.describe("start-up").endswith("): ValueError: Unknown routing strategy: x")


def test_a_process_that_exits_0_while_watched_is_a_death(spawn):
    server = spawn(UP_THEN_EXITS_0)
    watch = EngineWatch([(server, HEALTH)]).start()

    death = wait_for_death(watch, 5.0)

    assert (death.exit_code, death.sign, death.cause) == (0, "exited with code 0", "shutting down cleanly")
    assert death.describe("smoke").startswith("server exited with code 0 during smoke, ")


def test_a_fatal_log_line_is_a_death_even_while_the_process_and_port_look_fine(spawn):
    server = spawn(LOGS_OOM, name="attention")
    watch = EngineWatch([(server, HEALTH)]).start()

    death = wait_for_death(watch, 5.0)

    assert (death.role, death.sign) == ("attention", "log: CUDA out of memory")
    assert death.cause == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def test_a_healthy_role_is_no_death(spawn):
    server = spawn(DEAD_ENGINE_API_ALIVE.replace("> 0.5", "> 600").replace("< 0.5", "< 600"))
    wait_for_log(server.log_path, "api up")
    watch = EngineWatch([(server, HEALTH)]).start()
    (role,) = watch._roles
    wait_until(lambda: role.health.healthy, what="the watch's first 200 from /health")
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
