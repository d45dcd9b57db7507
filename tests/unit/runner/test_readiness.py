"""Unit tier. Readiness: a role that dies during start-up fails the wait with its cause, not at the end of its
start-up budget; cancel and budget stop it. How soon a death is seen on a real engine is benchmarks/lifecycle.py's
crash-detection lag."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from stand_ins import SLEEPER, on_release, wait_for_log

from afd_e2e.runner.cancellation import CancelFlag, Cancelled
from afd_e2e.runner.readiness import StartupTimeout, wait_until_ready
from afd_e2e.runner.watch import EngineDied, EngineWatch
from unit.timing import FakeClock


def dies(release) -> str:
    """A server that fails its start-up (a bad flag) once the test releases it: while the wait is on."""
    return (
        on_release(release) + "print('error: unrecognized arguments: --no-such-flag', flush=True); raise SystemExit(2)"
    )


@pytest.fixture
def port() -> Iterator[int]:
    """A port bound here but never listened on: connections are refused, and no other process (another test run on
    this machine, an engine) can take it and answer the readiness URL."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def urls(port: int) -> tuple[str, str]:
    return f"http://127.0.0.1:{port}/v1/models", f"http://127.0.0.1:{port}/health"


def watched(server, port: int) -> EngineWatch:
    return EngineWatch([(server, urls(port)[1])]).start()


def test_a_server_that_exits_fails_the_wait_at_once_with_its_cause(spawn, port, tmp_path):
    release = tmp_path / "release"
    server = spawn(dies(release))
    watch = watched(server, port)

    with pytest.raises(EngineDied) as caught:  # a StartupTimeout (60 s, only a guard) if the death went unseen
        wait_until_ready(urls(port)[0], watch, server.launched_at, 60, CancelFlag(), checks=[release.touch])
    watch.stop()

    death = caught.value.death
    assert (death.role, death.exit_code, death.sign) == ("server", 2, "exited with code 2")
    assert death.cause == "error: unrecognized arguments: --no-such-flag"
    assert death.describe("start-up").startswith("server exited with code 2 during start-up, ")


def test_the_wait_ends_at_the_startup_budget_naming_it(spawn, port):
    """The budget is read on the clock given: 20 s pass on it at each look, so the fourth look is past 60 s."""
    server = spawn(SLEEPER)
    watch = watched(server, port)
    clock = FakeClock()
    looks = []

    def look():
        looks.append(clock.elapsed)
        clock.advance(20)

    with pytest.raises(StartupTimeout, match=r"within its start-up budget \(budgets.startup_s = 60 s\)"):
        wait_until_ready(urls(port)[0], watch, clock(), 60, CancelFlag(), checks=[look], clock=clock)
    watch.stop()
    assert looks == [0, 20, 40, 60]  # not before the budget was out on that clock (60 s is not past it), then at once


def test_cancelling_stops_the_wait_promptly(spawn, port):
    server = spawn(SLEEPER)
    wait_for_log(server.log_path, "stand-in up")
    watch = watched(server, port)
    flag = CancelFlag()
    looks = []

    def cancelled_while_waiting():  # SIGTERM arrives during the first look
        looks.append(1)
        flag.cancel("cancelled by SIGTERM")

    with pytest.raises(Cancelled, match="cancelled by SIGTERM"):
        wait_until_ready(urls(port)[0], watch, server.launched_at, 600, flag, checks=[cancelled_while_waiting])

    assert looks == [1]  # the cancel ended the wait at its next look, not at the 600 s budget
    watch.stop()
