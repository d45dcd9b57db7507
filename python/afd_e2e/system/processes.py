"""Where server processes are started: each in its own session, output to its log file, markers in its env."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

TAIL_LINES = 40
REAP_TIMEOUT_S = 2.0  # after teardown the group is gone; the kernel may need a moment to hand back the exit code
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass(frozen=True)
class ServerProcess:
    name: str
    argv: tuple[str, ...]
    popen: subprocess.Popen
    log_path: Path
    launched_at: float  # time.monotonic()

    @property
    def pid(self) -> int:
        return self.popen.pid

    def exit_code(self) -> int | None:
        """The exit code once it has exited (reaping it), else None."""
        return self.popen.poll()

    def reap(self, timeout_s: float = REAP_TIMEOUT_S) -> int | None:
        """After teardown: wait up to ``timeout_s`` for the exit code (the group may be gone a moment before
        the kernel has the leader ready to reap); None if it is still running."""
        try:
            return self.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None


def launch(name: str, argv: tuple[str, ...], env: Mapping[str, str], log_path: Path) -> ServerProcess:
    """Start ``argv`` in a new session (its own process group), stdout and stderr into ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        popen = subprocess.Popen(
            argv, env=dict(env), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    return ServerProcess(name, argv, popen, log_path, time.monotonic())


def read_log_end(path: Path, size: int = 64 * 1024) -> str:
    """The last ``size`` bytes of a log, decoded leniently, ANSI colours removed; '' if there is no log."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - size))
            data = handle.read()
    except OSError:
        return ""
    return ANSI.sub("", data.decode("utf-8", errors="replace"))


def final_lines(text: str) -> list[str]:
    """Non-blank lines, each progress-bar redraw (carriage returns) collapsed to its last state."""
    lines = []
    for line in text.split("\n"):
        states = [state.rstrip() for state in line.split("\r") if state.strip()]
        if states:
            lines.append(states[-1])
    return lines


def log_tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last lines of a process's log, for failure reports."""
    return "\n".join(final_lines(read_log_end(path))[-lines:])
