"""Where the runner says what it is doing: events at once, and while it waits a heartbeat line every ~10 s.

A 234 GiB checkpoint takes many minutes to load; a silent job looks hung and gets cancelled. The heartbeat names
the case, the phase, the time spent in it and the last meaningful server log line (e.g. weight-loading percent).
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from afd_e2e.system.processes import final_lines, read_log_end

HEARTBEAT_S = 10.0
MAX_LINE = 160
# vLLM's "(EngineCore pid=12) INFO 11-29 20:25:59 [core.py:133] " and torch's glog "W1129 20:26:06.655000 12 f.py:53] "
_PREFIXES = (
    re.compile(
        r"^(?:\([\w-]+ pid=\d+\)\s*)?(?:(INFO|WARNING|ERROR|DEBUG)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]*\]\s*)?"
    ),
    re.compile(r"^\[?([WIEF])\d{4} \d\d:\d\d:\d\d\.\d+(?:\s+\d+)?\s+[^\]]*\]\s*"),
)
_LEVELS = {"W": "WARNING", "E": "ERROR", "F": "ERROR", "I": "INFO"}
_ACCESS_LOG = re.compile(r'"(?:GET|POST|HEAD|PUT|DELETE) \S+ HTTP/[\d.]+" \d{3}')


def split_prefix(line: str) -> tuple[str | None, str]:
    """A log line's level (INFO/WARNING/ERROR/DEBUG or None) and its text without the process/level/source prefix."""
    text, level = line.strip(), None
    for prefix in _PREFIXES:
        if (match := prefix.match(text)) and match.end():
            level = _LEVELS.get(match.group(1) or "", match.group(1))
            text = text[match.end() :].strip()
    return level, text


def meaningful(line: str) -> str | None:
    """A log line without its process/level/source prefix; None for blank lines and HTTP access logs."""
    if _ACCESS_LOG.search(line):
        return None
    level, text = split_prefix(line)
    if not any(ch.isalnum() for ch in text):
        return None
    if level in ("WARNING", "ERROR"):
        text = f"{level}: {text}"
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"


def last_meaningful_line(text: str) -> str | None:
    for line in reversed(final_lines(text)):
        if (kept := meaningful(line)) is not None:
            return kept
    return None


def elapsed(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Progress:
    """Prints ``afd-e2e | case | phase | elapsed | message`` lines; use as a context manager to run the heartbeat.

    Calling the instance prints a message at once (this is what workload phases get as ``ctx.progress``).
    """

    def __init__(
        self,
        *,
        interval_s: float = HEARTBEAT_S,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock``: what the heartbeat's interval and the phase's elapsed time are read on (tests drive it)."""
        self.interval_s = interval_s
        self.clock = clock
        self.stream = stream or sys.stdout
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.case_id = ""
        self.phase = ""
        self._phase_started = self.clock()
        self._logs: tuple[Path, ...] = ()
        self._last_printed = self.clock()

    def __enter__(self) -> Progress:
        self._thread = threading.Thread(target=self._beat, name="afd-e2e-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()

    def enter(self, case_id: str, phase: str, logs: Sequence[Path] = ()) -> None:
        """Start a phase: the heartbeat reports it and the server logs named here."""
        with self._lock:
            self.case_id, self.phase, self._logs = case_id, phase, tuple(logs)
            self._phase_started = self.clock()

    def __call__(self, message: str) -> None:
        message = message.rstrip().rstrip(",;:").rstrip()  # "bench warmup 1/1: 10 s, " when a part was empty
        with self._lock:
            spent = elapsed(self.clock() - self._phase_started)
            parts = ["afd-e2e", self.case_id, self.phase, spent, message] if self.case_id else ["afd-e2e", message]
            print(" | ".join(parts), file=self.stream, flush=True)
            self._last_printed = self.clock()

    def heartbeat_message(self) -> str:
        """'still waiting' plus the last meaningful line of the most recently written server log."""
        logs = [p for p in self._logs if p.exists()]
        if not logs:
            return "still running"
        latest = max(logs, key=lambda p: p.stat().st_mtime)
        line = last_meaningful_line(read_log_end(latest, 16 * 1024))
        if not line:
            return "still running"
        who = f"{latest.stem}: " if len(self._logs) > 1 else "server: "
        return f"still running; {who}{line}"

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.interval_s / 4)):
            if self.case_id and self.clock() - self._last_printed >= self.interval_s:
                self(self.heartbeat_message())
