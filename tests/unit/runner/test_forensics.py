"""Forensics on real processes: every process of a case dumped by py-spy concurrently within the deadline, a
stopped one with --nonblocking, one that cannot be dumped named with the reason; files with state and stacks.

Unit tier: what each process's dump holds, never how fast it came: capture_processes is given GUARD_S as its
deadline (its default, DEADLINE_S, is a real engine's budget; four py-spy runs beside a spinning child on a loaded
2-core machine can take longer, and a dump cut short would fail a test about its contents). Each process is read
once it has reached the state it stays in (a state letter is one instant's)."""

from __future__ import annotations

import re
import shutil
import signal

import psutil
import pytest
from stand_ins import wait_for_log

from afd_e2e.forensics import capture_processes
from afd_e2e.forensics.pyspy import busy_thread, find_pyspy, reason, threads
from afd_e2e.report.annotation import render_annotation
from afd_e2e.system.process_state import case_processes
from results_docs import load_fixture, typed
from unit.timing import GUARD_S, wait_for_status, wait_until

pytestmark = pytest.mark.skipif(find_pyspy() is None, reason="py-spy is not installed (pip install py-spy)")

# A server whose child spins in a named function (the busy thread) and another that stops itself.
SERVER = r"""
import subprocess, sys, time
spin = "def busy_loop_here():\n    print('spinning', flush=True)\n    while True:\n        sum(range(1000))\nbusy_loop_here()"
spinner = subprocess.Popen([sys.executable, "-c", spin], env={})
stopped = subprocess.Popen(
    [sys.executable, "-c", "import os, signal, time\ndef waits_here():\n    os.kill(os.getpid(), signal.SIGSTOP)\n"
     "    time.sleep(600)\nwaits_here()"], env={})
shell = subprocess.Popen(["sleep", "600"])
print(f"spinner={spinner.pid} stopped={stopped.pid} shell={shell.pid}", flush=True)
time.sleep(600)
"""


def _settled(stopped: int, shell: int) -> None:
    """The stopped child stopped, and ``sleep 600`` in its sleep (still exec'ing, it reads "running")."""
    wait_for_status(stopped, psutil.STATUS_STOPPED)
    wait_for_status(shell, psutil.STATUS_SLEEPING)


def test_every_process_is_dumped_or_named_with_the_reason(spawn, tmp_path):
    server = spawn(SERVER, name="ffn")
    log = wait_for_log(server.log_path, "shell=")
    spinner, stopped, shell = (int(v) for v in re.search(r"spinner=(\d+) stopped=(\d+) shell=(\d+)", log).groups())
    _settled(stopped, shell)
    wait_for_log(server.log_path, "spinning")  # the spinner is in its loop

    record = capture_processes(
        case_processes([("ffn", server.pid)]),
        case_id="afd",
        trigger="stall",
        reason="no token for 30 s",
        out_dir=tmp_path,
        deadline_s=GUARD_S,
    )

    assert record.trigger == "stall" and record.reason == "no token for 30 s"
    dumps = {d.pid: d for d in record.processes}
    assert set(dumps) == {server.pid, spinner, stopped, shell}
    assert dumps[spinner].mode in ("native", "python") and dumps[spinner].failure is None
    assert any("busy_loop_here" in frame for frame in dumps[spinner].busy_frames)
    assert dumps[stopped].status == "stopped" and dumps[stopped].mode == "nonblocking"
    assert any("waits_here" in frame for frame in dumps[stopped].busy_frames)
    assert dumps[shell].mode is None and dumps[shell].failure.startswith("not a Python process")
    for dump in record.processes:
        assert dump.path == f"forensics/afd/ffn-{dump.pid}.txt"
        text = (tmp_path / dump.path).read_text()
        assert f"pid {dump.pid}" in text and f"state: {dump.status}; CPU time" in text and "threads" in text
    assert "busy_loop_here" in (tmp_path / dumps[spinner].path).read_text()
    assert "could not dump it: not a Python process" in (tmp_path / dumps[shell].path).read_text()
    psutil.Process(stopped).send_signal(signal.SIGCONT)


def test_a_zombie_and_a_missing_pyspy_are_named(spawn, tmp_path):
    server = spawn(
        "import subprocess, time; done = subprocess.Popen(['true']); print('stand-in up', flush=True); time.sleep(600)",
        name="server",
    )
    wait_for_log(server.log_path, "stand-in up")
    wait_until(lambda: any(s.zombie for s in case_processes([("server", server.pid)])), what="`true` exiting")
    states = case_processes([("server", server.pid)])
    zombie = next(s for s in states if s.zombie)

    record = capture_processes(states, case_id="c", trigger="death", reason="r", out_dir=tmp_path, find=lambda: None)
    by_pid = {d.pid: d for d in record.processes}
    assert by_pid[zombie.pid].failure == "a zombie: it has exited, nothing to dump"
    assert by_pid[server.pid].failure.startswith("py-spy is not installed")


def test_pyspy_errors_become_reasons():
    backtrace = "\n\nStack backtrace:\n   0: anyhow::error::msg\n  10: main"
    assert reason("Error: Failed to find python version from target process" + backtrace, 1).startswith(
        "not a Python process"
    )
    assert reason("Error: Operation not permitted (os error 1)" + backtrace, 1) == (
        "ptrace not permitted (kernel.yama.ptrace_scope or no CAP_SYS_PTRACE): Error: Operation not permitted (os "
        "error 1)"
    )
    assert reason("Error: Failed to suspend process" + backtrace, 1).startswith("failed to suspend the process")
    assert reason("", None) == "py-spy did not answer in time"
    assert reason("Error: something new" + backtrace, 1) == "Error: something new"


def test_the_busy_thread_is_the_active_one_else_the_first():
    text = (
        "Process 1: python\nPython v3.11.7\n\n"
        'Thread 1 (idle): "MainThread"\n    <module> (<string>:6)\n'
        'Thread 3 (active+gil): "spinner"\n    spin (<string>:4)\n    Thread.run (threading.py:982)\n'
    )
    assert [t.header for t in threads(text)] == ["Thread 1 (idle): MainThread", "Thread 3 (active+gil): spinner"]
    assert busy_thread(text).frames == ("spin (<string>:4)", "Thread.run (threading.py:982)")
    assert busy_thread(text.replace("active+gil", "idle")).header == "Thread 1 (idle): MainThread"
    assert shutil.which("true")


def test_the_annotation_quotes_each_processes_state_and_innermost_frames(spawn, tmp_path):
    server = spawn(SERVER, name="ffn")
    log = wait_for_log(server.log_path, "shell=")
    spinner, stopped, shell = (int(v) for v in re.search(r"spinner=(\d+) stopped=(\d+) shell=(\d+)", log).groups())
    _settled(stopped, shell)
    wait_for_log(server.log_path, "spinning")
    taken = capture_processes(
        case_processes([("ffn", server.pid)]),
        case_id="cpu-tp1",
        trigger="death",
        reason="ffn engine died <x>",
        out_dir=tmp_path,
        deadline_s=GUARD_S,
    )
    psutil.Process(stopped).send_signal(signal.SIGCONT)
    results = typed(load_fixture("tiny-cpu"))
    results.cases["cpu-tp1"].forensics.append(taken)

    body = render_annotation(results).body

    section = body[body.index("### Forensics") :]
    assert "death: ffn engine died &lt;x&gt;" in section and "(4 processes, dumped in" in section
    assert f"| ffn | python pid {stopped} | stopped |" in section
    assert "<code>waits\\_here \\(&lt;string&gt;\\:3\\)</code>" in section
    assert "<code>busy\\_loop\\_here \\(&lt;string&gt;\\:4\\)</code>" in section
    assert f"| ffn | sleep pid {shell} | sleeping |" in section and "not dumped: not a Python process" in section
    assert f'<a href="artifact://forensics/cpu-tp1/ffn-{spinner}.txt">' in section
    assert "### Forensics" not in render_annotation(typed(load_fixture("tiny-cpu"))).body


def test_a_process_that_ends_during_its_dump_is_named_ended_not_with_pyspys_words(spawn, tmp_path):
    """The 12-06 CI failure: vLLM's API server shut itself down while py-spy read it, and the record said
    "Failed to get process executable name" (py-spy's words for a pid that is gone or a zombie)."""
    server = spawn(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'], stdin=subprocess.PIPE)\n"
        "print(f'child={child.pid}', flush=True)\n"
        "time.sleep(600)",
        name="server",
    )
    child = int(re.search(r"child=(\d+)", wait_for_log(server.log_path, "child=")).group(1))
    wait_for_status(child, psutil.STATUS_SLEEPING)
    states = case_processes([("server", server.pid)])  # read while the child is alive, as forensics reads them
    assert not next(s for s in states if s.pid == child).zombie
    psutil.Process(child).kill()  # it ends after its state was read: its parent does not reap it
    wait_for_status(child, psutil.STATUS_ZOMBIE)

    record = capture_processes(states, case_id="c", trigger="death", reason="r", out_dir=tmp_path, deadline_s=GUARD_S)
    ended = next(d for d in record.processes if d.pid == child)
    assert ended.failure == "a zombie: it has exited, nothing to dump" and ended.mode is None
