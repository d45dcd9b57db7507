"""Readiness: a server that exits during start-up fails at once with its log; cancel and timeout stop the wait."""

from __future__ import annotations

import threading
import time

import pytest
from stand_ins import SLEEPER, UNIT_PORT_BASE, wait_for_log

from afd_e2e.runner.cancellation import CancelFlag, Cancelled
from afd_e2e.runner.processes import log_tail
from afd_e2e.runner.readiness import ServerExited, StartupTimeout, wait_until_ready

URL = f"http://127.0.0.1:{UNIT_PORT_BASE + 20}/v1/models"
DIES = (
    "import sys, time; time.sleep(0.3); print('error: unrecognized arguments: --no-such-flag', flush=True); sys.exit(2)"
)


def test_a_server_that_exits_fails_the_wait_at_once_with_its_log(spawn):
    server = spawn(DIES)

    with pytest.raises(ServerExited) as caught:
        wait_until_ready(URL, [server], timeout_s=600, flag=CancelFlag())
    noticed = time.monotonic()

    assert caught.value.exit_code == 2
    assert "server exited with code 2 during start-up" in str(caught.value)
    assert noticed - server.launched_at < 0.3 + 1.0  # its own 0.3 s plus Python start-up, not the 600 s timeout
    assert log_tail(caught.value.server.log_path) == "error: unrecognized arguments: --no-such-flag"


def test_the_wait_ends_at_the_startup_timeout(spawn):
    server = spawn(SLEEPER)

    with pytest.raises(StartupTimeout, match="did not answer 200 within the start-up timeout of 0 s"):
        wait_until_ready(URL, [server], timeout_s=0.3, flag=CancelFlag())


def test_cancelling_stops_the_wait_promptly(spawn):
    server = spawn(SLEEPER)
    wait_for_log(server.log_path, "stand-in up")
    flag = CancelFlag()
    threading.Timer(0.2, flag.cancel, args=("cancelled by SIGTERM",)).start()
    started = time.monotonic()

    with pytest.raises(Cancelled, match="cancelled by SIGTERM"):
        wait_until_ready(URL, [server], timeout_s=600, flag=flag)

    assert time.monotonic() - started < 0.5
