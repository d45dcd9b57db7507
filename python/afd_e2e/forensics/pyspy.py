"""Where ``py-spy dump`` is run and read: one process's stacks, native frames where the platform allows.

Measured on an H200 agent against vLLM 0.26 (py-spy 0.4.3): a Python-only dump takes 0.01-0.02 s, ``--native``
0.44-0.75 s. On a stopped (SIGSTOP) process the default mode fails ("Failed to suspend process"); ``--nonblocking``
reads its Python stack without suspending it (no native frames). So: a stopped process gets ``--nonblocking``;
any other gets ``--native``, then Python-only, then ``--nonblocking``, each within what is left of the deadline.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

PYSPY = "py-spy"
BUSY_FRAMES = 5  # innermost frames quoted per busy thread

# mode -> py-spy dump flags, in the order they are tried on a process that is not stopped
MODES: dict[str, tuple[str, ...]] = {"native": ("--native",), "python": (), "nonblocking": ("--nonblocking",)}
# failures no other mode can mend
GONE, ZOMBIE = "the process is gone", "a zombie: it has exited, nothing to dump"
FINAL = (GONE, ZOMBIE, "not a Python process", "ptrace not permitted")
_THREAD = re.compile(r"^Thread (?P<id>\S+) \((?P<state>[^)]*)\)(?::\s*\"?(?P<name>[^\"]*)\"?)?\s*$")


def find_pyspy(python: str | None = None) -> str | None:
    """``py-spy`` beside this Python (the wheel's script in the same environment) first, else on PATH."""
    beside = Path(python or sys.executable).parent / PYSPY
    if beside.is_file():
        return str(beside)
    return shutil.which(PYSPY)


@dataclass(frozen=True)
class Dump:
    """What py-spy said about one process: its text in the first mode that worked, or why none did."""

    text: str | None
    mode: str | None
    failure: str | None  # why it could not be dumped at all (the last mode's reason)
    notes: tuple[str, ...]  # modes that failed on the way, each with its reason
    seconds: float


def reason(stderr: str, returncode: int | None) -> str:
    """One line for a failed py-spy run, naming the cause where it is known."""
    text = stderr.strip()
    lowered = text.lower()
    if "permission denied" in lowered or "operation not permitted" in lowered or "eperm" in lowered:
        return "ptrace not permitted (kernel.yama.ptrace_scope or no CAP_SYS_PTRACE): " + _last_line(text)
    if "failed to suspend process" in lowered:
        return "failed to suspend the process (stopped?): " + _last_line(text)
    if "no such process" in lowered:
        return GONE
    if "failed to find python version" in lowered:
        return "not a Python process (py-spy found no interpreter in it)"
    if returncode is None:
        return "py-spy did not answer in time"
    return _last_line(text) or f"py-spy exited {returncode}"


def _last_line(text: str) -> str:
    """py-spy's ``Error: ...`` line (its Rust backtrace follows it), else the last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error:")]
    return (errors or lines or [""])[-1][:300]


def run_dump(
    pyspy: str, pid: int, flags: tuple[str, ...], timeout_s: float, env: Mapping[str, str] | None = None
) -> tuple[str | None, str]:
    """One ``py-spy dump`` (``env``: its environment, the run's markers in it): its text, or None and why not."""
    argv = [pyspy, "dump", "--pid", str(pid), *flags]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, check=False, env=dict(env) if env else None
        )
    except subprocess.TimeoutExpired:
        return None, reason("", None)
    except OSError as exc:
        return None, f"cannot run {pyspy}: {exc.strerror}"
    if done.returncode == 0 and done.stdout.strip():
        return done.stdout, ""
    return None, reason(done.stderr or done.stdout, done.returncode)


def exited(pid: int) -> str | None:
    """Why ``pid`` can no longer be dumped because it has ended (gone, or a zombie its parent has not reaped), else
    None. A process that ends while py-spy reads it fails with "Failed to get process executable name" either way
    (py-spy 0.4, checked on both), words that do not say the process ended."""
    try:
        return ZOMBIE if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE else None
    except psutil.NoSuchProcess:
        return GONE
    except psutil.Error:
        return None


def dump(
    pyspy: str, pid: int, *, stopped: bool, deadline: float, native: bool = True, env: Mapping[str, str] | None = None
) -> Dump:
    """Dump ``pid``: the first of the modes that works before ``deadline`` (time.monotonic())."""
    started = time.monotonic()
    modes = ["nonblocking"] if stopped else [*(["native"] if native else []), "python", "nonblocking"]
    notes: list[str] = []
    failure = "no time left before the deadline"
    for mode in modes:
        left = deadline - time.monotonic()
        if left <= 0.05:
            break
        text, failure = run_dump(pyspy, pid, MODES[mode], left, env)
        if text is not None:
            return Dump(text, mode, None, tuple(notes), time.monotonic() - started)
        notes.append(f"{mode}: {failure}")
        if (ended := exited(pid)) is not None:  # it ended during the dump: py-spy's own words would not say so
            failure = ended
        if failure.startswith(FINAL):
            break
    return Dump(None, None, failure, tuple(notes), time.monotonic() - started)


@dataclass(frozen=True)
class Thread:
    header: str  # "Thread 123 (active): MainThread"
    active: bool
    frames: tuple[str, ...]  # innermost first, as py-spy prints them


def threads(text: str) -> list[Thread]:
    """The threads of a py-spy dump, each with its frames (innermost first)."""
    found: list[Thread] = []
    header, active, frames = None, False, []
    for line in text.splitlines():
        match = _THREAD.match(line.strip()) if not line.startswith((" ", "\t")) else None
        if match:
            if header is not None:
                found.append(Thread(header, active, tuple(frames)))
            state = match["state"]
            name = (match["name"] or "").strip()
            header = f"Thread {match['id']} ({state})" + (f": {name}" if name else "")
            active, frames = "active" in state, []
        elif header is not None and line.startswith((" ", "\t")) and line.strip():
            frames.append(line.strip())
    if header is not None:
        found.append(Thread(header, active, tuple(frames)))
    return found


def busy_thread(text: str) -> Thread | None:
    """The thread that says where the process is: the first active one, else the first (the main thread)."""
    found = [t for t in threads(text) if t.frames]
    if not found:
        return None
    return next((t for t in found if t.active), found[0])
