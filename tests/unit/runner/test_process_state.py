"""A case's processes are found by role without their markers (vLLM's setproctitle clears its children's environ):
the server's descendants and its session, each with its OS state."""

from __future__ import annotations

import os
import re
import signal

import psutil
from stand_ins import wait_for_log

from afd_e2e.system.process_state import case_processes
from unit.timing import wait_for_status

# A server whose children carry no markers (an empty environment, as after setproctitle): one sleeping, one that
# stops itself (SIGSTOP), one orphaned (re-parented, still in the server's session).
UNMARKED_TREE = r"""
import subprocess, sys, time
sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env={})
stopped = subprocess.Popen(
    [sys.executable, "-c", "import os, signal, time; os.kill(os.getpid(), signal.SIGSTOP); time.sleep(600)"], env={})
middle = subprocess.run(
    [sys.executable, "-c", "import subprocess as s, sys; "
     "print(s.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], stdout=s.DEVNULL, env={}).pid)"],
    stdout=subprocess.PIPE, text=True, check=True, env={})
print(f"sleeper={sleeper.pid} stopped={stopped.pid} orphan={int(middle.stdout)}", flush=True)
time.sleep(600)
"""


def test_every_process_of_a_role_is_found_with_its_state_without_markers(spawn):
    ffn = spawn(UNMARKED_TREE, name="ffn")
    attention = spawn("import time; print('stand-in up', flush=True); time.sleep(600)", name="attention")
    log = wait_for_log(ffn.log_path, "orphan=")
    wait_for_log(attention.log_path, "stand-in up")
    sleeper, stopped, orphan = (int(v) for v in re.search(r"sleeper=(\d+) stopped=(\d+) orphan=(\d+)", log).groups())
    wait_for_status(stopped, psutil.STATUS_STOPPED)
    wait_for_status(sleeper, psutil.STATUS_SLEEPING)  # in its time.sleep, where it stays
    assert not psutil.Process(orphan).environ()  # nothing to find it by but its session

    states = case_processes([("ffn", ffn.pid), ("attention", attention.pid)])

    by_pid = {s.pid: s for s in states}
    assert set(by_pid) == {ffn.pid, sleeper, stopped, orphan, attention.pid}
    assert [s.role for s in states] == ["ffn"] * 4 + ["attention"]  # roles in the order given, the server first
    assert states[0].pid == ffn.pid and states[0].leader and not by_pid[sleeper].leader
    assert by_pid[stopped].status == psutil.STATUS_STOPPED and by_pid[stopped].stopped
    assert by_pid[stopped].describe() == f"ffn {by_pid[stopped].name} pid {stopped} is stopped"
    assert by_pid[sleeper].status == psutil.STATUS_SLEEPING and by_pid[sleeper].threads >= 1
    assert by_pid[orphan].ppid != ffn.pid
    assert all(s.cpu_s >= 0 for s in states)
    os.kill(stopped, signal.SIGCONT)


def test_a_gone_server_has_no_processes():
    assert case_processes([("server", 2**22 + 7)]) == []
