"""Unit tier. Readiness: a role that dies during start-up fails the wait with its cause, not at the end of its
start-up budget; cancel and budget stop it. How soon a death is seen on a real engine is benchmarks/lifecycle.py's
crash-detection lag."""

from __future__ import annotations

import pytest
from stand_ins import SLEEPER, UNIT_PORT_BASE, wait_for_log

from afd_e2e.runner.cancellation import CancelFlag, Cancelled
from afd_e2e.runner.readiness import StartupTimeout, wait_until_ready
from afd_e2e.runner.watch import EngineDied, EngineWatch

URL = f"http://127.0.0.1:{UNIT_PORT_BASE + 20}/v1/models"
HEALTH = f"http://127.0.0.1:{UNIT_PORT_BASE + 20}/health"
DIES = (
    "import sys, time; time.sleep(0.3); print('error: unrecognized arguments: --no-such-flag', flush=True); sys.exit(2)"
)


def watched(server) -> EngineWatch:
    return EngineWatch([(server, HEALTH)]).start()


def test_a_server_that_exits_fails_the_wait_at_once_with_its_cause(spawn):
    server = spawn(DIES)
    watch = watched(server)

    with pytest.raises(EngineDied) as caught:  # a StartupTimeout (60 s) if the death went unseen
        wait_until_ready(URL, watch, server.launched_at, 60, CancelFlag())
    watch.stop()

    death = caught.value.death
    assert (death.role, death.exit_code, death.sign) == ("server", 2, "exited with code 2")
    assert death.cause == "error: unrecognized arguments: --no-such-flag"
    assert death.describe("start-up").startswith("server exited with code 2 during start-up, ")


def test_the_wait_ends_at_the_startup_budget_naming_it(spawn):
    server = spawn(SLEEPER)
    watch = watched(server)

    with pytest.raises(StartupTimeout, match=r"within its start-up budget \(budgets.startup_s = 0.3 s\)"):
        wait_until_ready(URL, watch, server.launched_at, 0.3, CancelFlag())
    watch.stop()


def test_cancelling_stops_the_wait_promptly(spawn):
    server = spawn(SLEEPER)
    wait_for_log(server.log_path, "stand-in up")
    watch = watched(server)
    flag = CancelFlag()
    looks = []

    def cancelled_while_waiting():  # SIGTERM arrives during the first look
        looks.append(1)
        flag.cancel("cancelled by SIGTERM")

    with pytest.raises(Cancelled, match="cancelled by SIGTERM"):
        wait_until_ready(URL, watch, server.launched_at, 600, flag, checks=[cancelled_while_waiting])

    assert looks == [1]  # the cancel ended the wait at its next look, not at the 600 s budget
    watch.stop()
