"""Will a failed case's forensics (``afd_e2e.forensics``) get stacks on this agent? py-spy must be installed and
allowed to read another process: a live probe dumps a short-lived Python child of afd-e2e, which is as far from
py-spy as the servers are (siblings, not its descendants), and Yama's ptrace scope and CAP_SYS_PTRACE say why not.

A misfit is a warning, never a failure: the run works, a failure is then only explained without stacks.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from afd_e2e.forensics.pyspy import MODES, find_pyspy, run_dump
from afd_e2e.preflight.checks import WARN, PreflightCheck, passed

NAME = "stack dumps"
PTRACE_SCOPE = Path("/proc/sys/kernel/yama/ptrace_scope")
CAP_SYS_PTRACE = 19
PROBE_TIMEOUT_S = 5.0
WANTED = "py-spy installed and allowed to read the servers (ptrace)"
INSTALL = "pip install 'py-spy>=0.4.3,<0.5' into afd-e2e's environment"
_SCOPES = {
    1: "kernel.yama.ptrace_scope = 1: only a process's ancestors may read it, and py-spy is not the servers' ancestor",
    2: "kernel.yama.ptrace_scope = 2: only with CAP_SYS_PTRACE",
    3: "kernel.yama.ptrace_scope = 3: ptrace is disabled until reboot",
}


def ptrace_scope() -> int | None:
    """Yama's ptrace scope; None without Yama (then ordinary same-user rules apply)."""
    try:
        return int(PTRACE_SCOPE.read_text().strip())
    except (OSError, ValueError):
        return None


def has_cap_sys_ptrace(status: str | None = None) -> bool:
    """CAP_SYS_PTRACE in this process's effective capabilities (``/proc/self/status``)."""
    try:
        text = status if status is not None else Path("/proc/self/status").read_text()
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_PTRACE & 1)
    return False


def probe_dump(pyspy: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Dump a sleeping Python child as the forensics would a server, within ``timeout_s``; None when it worked, else
    why not."""
    # dumped only once it says it runs: a child still loading its interpreter has no Python state to find yet (a
    # loaded agent made that race a false "could not dump")
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        child.stdout.readline()
        text, failure = run_dump(pyspy, child.pid, MODES["python"], timeout_s)
        return None if text is not None else failure
    finally:
        child.kill()
        child.wait()


def judge_stack_dumps(pyspy: str | None, probe_failure: str | None, scope: int | None, cap: bool) -> PreflightCheck:
    """The check from what was found (pure)."""
    rights = "CAP_SYS_PTRACE" if cap else (_SCOPES.get(scope or 0) or f"kernel.yama.ptrace_scope = {scope or 0}")
    if pyspy is None:
        return PreflightCheck(NAME, WARN, f"py-spy not found beside {sys.executable} or on PATH", WANTED, INSTALL)
    if probe_failure is None:
        return passed(NAME, f"{pyspy} dumped a Python process ({rights})", WANTED)
    fix = "give the agent CAP_SYS_PTRACE (docker: --cap-add SYS_PTRACE)"
    fix += " or set kernel.yama.ptrace_scope=0" if scope in (1, 2) else ""
    return PreflightCheck(
        NAME, WARN, f"{pyspy} could not dump a Python process: {probe_failure}; {rights}", WANTED, fix
    )


def check_stack_dumps(
    find: Callable[[], str | None] = find_pyspy, timeout_s: float = PROBE_TIMEOUT_S
) -> list[PreflightCheck]:
    """The check, from a live probe given ``timeout_s`` (a test on a loaded machine gives it a hang guard: what it
    judges is whether py-spy may read a process here, not how fast)."""
    pyspy = find()
    return [
        judge_stack_dumps(pyspy, probe_dump(pyspy, timeout_s) if pyspy else None, ptrace_scope(), has_cap_sys_ptrace())
    ]
