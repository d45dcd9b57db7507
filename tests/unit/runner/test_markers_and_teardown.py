"""Unit tier: the process tree is found by its markers, stopped by SIGTERM to its groups, and SIGKILLed after the
grace. The grace is read on a FakeClock (tests/unit/timing.py) that moves on only once the processes that obey
SIGTERM are gone, so a slow machine never turns a polite exit into a SIGKILL; how fast a teardown is on a real
engine is benchmarks/lifecycle.py's "teardown beyond exit"."""

from __future__ import annotations

import os
import re
import signal
import time
from functools import partial

import psutil
from stand_ins import ESCAPING_TREE, IGNORES_SIGTERM, SLEEPER, wait_for_log

from afd_e2e.runner.teardown import POLL_INTERVAL_S, terminate
from afd_e2e.system.markers import find_marked, find_run, is_alive
from unit.timing import FakeClock, eventually, wait_until


def gone(*processes: psutil.Process):
    """A settle for FakeClock: wait (bounded) until every one of ``processes`` is gone (zombies count)."""
    return lambda: eventually(lambda: not any(is_alive(p) for p in processes))


def test_descendants_that_left_the_group_or_were_reparented_are_found(run_id, spawn):
    parent = spawn(ESCAPING_TREE)
    log = wait_for_log(parent.log_path, "orphan=")
    escaped, orphan = (int(v) for v in re.search(r"escaped=(\d+) orphan=(\d+)", log).groups())

    found = {m.process.pid: m for m in find_marked(run_id)}

    assert {parent.pid, escaped, orphan} <= set(found)
    assert psutil.Process(orphan).ppid() != parent.pid  # re-parented away from the tree
    assert os.getpgid(escaped) != os.getpgid(parent.pid)  # left the process group
    assert all(m.case_id == "case" and m.name == "server" for m in found.values())


def test_marker_scan_is_limited_to_one_case(run_id, spawn):
    first = spawn(SLEEPER, case_id="one")
    second = spawn(SLEEPER, case_id="two")
    wait_for_log(first.log_path, "stand-in up")
    wait_for_log(second.log_path, "stand-in up")

    assert [m.process.pid for m in find_marked(run_id, "one")] == [first.pid]
    assert {m.process.pid for m in find_marked(run_id)} == {first.pid, second.pid}


def test_teardown_stops_the_whole_escaped_tree_with_sigterm(run_id, spawn):
    parent = spawn(ESCAPING_TREE)
    wait_for_log(parent.log_path, "orphan=")
    tree = [m.process for m in find_marked(run_id)]
    assert len(tree) == 3
    clock = FakeClock(settle=gone(*tree))

    outcome = terminate(partial(find_marked, run_id), grace_s=5.0, clock=clock, sleep=clock.sleep)

    assert not outcome.forced and not outcome.survivors
    assert not any(is_alive(p) for p in tree)
    assert parent.exit_code() == -signal.SIGTERM
    assert outcome.seconds <= 2 * POLL_INTERVAL_S  # it returned at its first look after the tree was gone


def test_a_process_ignoring_sigterm_is_killed_after_the_grace_and_reported(run_id, spawn):
    stubborn = spawn(IGNORES_SIGTERM, name="stubborn")
    polite = spawn(SLEEPER, name="polite")
    wait_for_log(stubborn.log_path, "ignoring SIGTERM")
    wait_for_log(polite.log_path, "stand-in up")
    stubborn_process, polite_process = psutil.Process(stubborn.pid), psutil.Process(polite.pid)

    def settle():  # the polite one exits on SIGTERM before the grace runs out; the stubborn one only on SIGKILL
        eventually(lambda: not is_alive(polite_process))
        if clock.elapsed >= 0.5:
            eventually(lambda: not is_alive(stubborn_process))

    clock = FakeClock(settle=settle)
    outcome = terminate(partial(find_marked, run_id), grace_s=0.5, clock=clock, sleep=clock.sleep)

    assert outcome.forced == frozenset({"stubborn"})
    assert not outcome.survivors
    assert 0.5 <= outcome.seconds <= 0.5 + 3 * POLL_INTERVAL_S  # the SIGKILL came when the grace ran out
    assert stubborn.exit_code() == -signal.SIGKILL
    assert polite.exit_code() == -signal.SIGTERM


def test_teardown_with_nothing_to_stop_returns_at_once(run_id):
    clock = FakeClock()
    outcome = terminate(partial(find_marked, run_id), grace_s=5.0, clock=clock, sleep=clock.sleep)

    assert outcome.seconds == 0.0 and clock.sleeps == []  # it never waited
    assert not outcome.forced and not outcome.survivors


def test_zombies_count_as_gone(run_id, spawn):
    server = spawn(SLEEPER)
    wait_for_log(server.log_path, "stand-in up")
    server.popen.send_signal(signal.SIGTERM)
    # exited, not yet reaped by its parent (this test): a zombie
    wait_until(lambda: psutil.Process(server.pid).status() == psutil.STATUS_ZOMBIE, what="the server's exit")

    assert find_marked(run_id) == []
    clock = FakeClock()
    assert terminate(partial(find_marked, run_id), grace_s=1.0, clock=clock, sleep=clock.sleep).forced == frozenset()


def test_a_stopped_process_exits_on_sigterm_without_a_sigkill(run_id, spawn):
    server = spawn(SLEEPER)
    wait_for_log(server.log_path, "stand-in up")
    server.popen.send_signal(signal.SIGSTOP)
    clock = FakeClock(settle=gone(psutil.Process(server.pid)))  # never gone without the SIGCONT: then SIGKILLed

    outcome = terminate(partial(find_marked, run_id), grace_s=3.0, clock=clock, sleep=clock.sleep)

    assert not outcome.forced and outcome.seconds <= 2 * POLL_INTERVAL_S
    assert server.exit_code() == -signal.SIGTERM


# A server whose child hides its markers (an empty environment, as vLLM's setproctitle leaves EngineCore's), then
# the server exits: the child is re-parented, only its session says whose it is.
HIDDEN_ORPHAN = r"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env={})
print(f"child={child.pid}", flush=True)
"""


def test_a_child_without_markers_is_found_by_its_servers_session_after_the_server_is_gone(run_id, spawn):
    server = spawn(HIDDEN_ORPHAN)
    child = int(re.search(r"child=(\d+)", wait_for_log(server.log_path, "child=")).group(1))
    server.popen.wait(30)

    assert find_marked(run_id) == []
    found = find_run(run_id, [("case", "server", server.pid)], since=time.time() - 60)
    assert [(m.process.pid, m.case_id, m.name) for m in found] == [(child, "case", "server")]
    assert find_run(run_id, [("case", "server", server.pid)], since=time.time() + 60) == []  # a reused pid's
    assert find_run(run_id, [("case", "server", server.pid)], "other case") == []

    clock = FakeClock(settle=gone(psutil.Process(child)))
    outcome = terminate(
        partial(find_run, run_id, [("case", "server", server.pid)]), grace_s=3.0, clock=clock, sleep=clock.sleep
    )
    assert (not outcome.forced and not psutil.pid_exists(child)) or psutil.Process(child).status() == "zombie"
