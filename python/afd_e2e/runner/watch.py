"""Where a case's engines are watched while they live: each role's process, its own ``/health``, its log.

A vLLM API server can outlive its engine: when the EngineCore process dies the API process keeps listening (vLLM 0.26
for as long as nobody sends a request; 0.32 for up to its 5 s watchdog, then it exits with code 0). So a role counts
as dead when any of these is seen, whichever comes first:

- its process exits, with any code (0 too: nothing of a case may end while the case runs);
- its own ``/health`` (every role serves one on its API port, the FFN role too), once it has answered 200, answers
  anything else (vLLM answers 503 for a dead engine) or stops accepting connections;
- its log shows a fatal marker (``FATAL_MARKERS``).

A role on another agent (``multi_agent/remote.py``) is watched through the same loop: its ``/health`` over the
network and the state its own agent publishes.

The cause quoted is the root-cause line of that role's log: the last exception line that is not one of vLLM's generic
wrappers (``EngineDeadError: ... See stack trace (above)``), else the first fatal marker line, else the last log line.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from afd_e2e.runner.readiness import REFUSED, http_status
from afd_e2e.system.processes import ANSI, ServerProcess, final_lines, read_log_end
from afd_e2e.system.progress import meaningful, split_prefix

WATCH_INTERVAL_S = 0.2
REFUSED_FOR_S = 1.0  # a healthy role that refuses connections this long has stopped listening
LOG_SETTLE_S = 0.3  # after a death seen on /health, let the engine's traceback reach the log before quoting it

# What vLLM writes when an engine is gone for good (label, pattern on the line without its ANSI colours).
FATAL_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("EngineDeadError", re.compile(r"\bEngineDeadError\b")),
    ("EngineCore fatal error", re.compile(r"EngineCore encountered a fatal error")),
    ("engine core died", re.compile(r"[Ee]ngine core(?: proc \S+)? (?:died|exited) unexpectedly")),
    ("error in an engine core process", re.compile(r"^\(EngineCore[^)]*\)\s+(?:ERROR\b|Traceback\b)")),
    ("CUDA out of memory", re.compile(r"CUDA out of memory|\bOutOfMemoryError\b")),
    ("NCCL error", re.compile(r"\bNCCL error\b|\bnccl(?:UnhandledCuda|System|Internal|InvalidUsage|Remote)Error\b")),
)
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)(?::\s.*)?$")
# vLLM's wrappers around the real error: never the root cause when something more specific was logged.
_GENERIC = re.compile(
    r"EngineDeadError|EngineCore encountered an issue|See (?:the )?(?:stack trace|root cause)"
    r"|[Ee]ngine core initialization failed|died unexpectedly|exited unexpectedly"
)


def fatal_marker(line: str) -> str | None:
    """The label of the first fatal marker ``line`` carries, or None."""
    return next((label for label, pattern in FATAL_MARKERS if pattern.search(line)), None)


def root_cause(log_text: str) -> str:
    """The line that says why a role died (see the module docstring); '' for an empty log."""
    lines = final_lines(log_text)
    texts = [split_prefix(line)[1] for line in lines]
    exceptions = [text for text in texts if _EXCEPTION_LINE.match(text)]
    specific = [text for text in exceptions if not _GENERIC.search(text)]
    if specific:
        return specific[-1]
    markers = [text for line, text in zip(lines, texts, strict=True) if fatal_marker(line)]
    if markers:
        return markers[0]  # the first sign; vLLM's wrappers (EngineDeadError) follow it
    if exceptions:
        return exceptions[-1]
    return next((kept for line in reversed(lines) if (kept := meaningful(line))), "")


class LogScanner:
    """Reads a log as it grows and reports the first fatal marker in the lines written since the last read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = ""

    def fatal(self) -> str | None:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except OSError:
            return None
        self._offset += len(data)
        text = self._partial + data.decode("utf-8", errors="replace")
        *lines, self._partial = text.split("\n")
        for line in lines:
            for state in line.split("\r"):
                if label := fatal_marker(ANSI.sub("", state)):
                    return label
        return None


@dataclass(frozen=True)
class RoleDeath:
    role: str  # the process's plan name: server, ffn or attention
    sign: str  # how it was seen: "exited with code 0", "/health answered 503", "log: EngineDeadError"
    exit_code: int | None
    cause: str  # the root-cause line of the role's log
    after_s: float  # since the role was launched
    seen_at: float  # time.monotonic() when the watch saw it
    what: str = "engine died"  # a role on another agent: "stalled" (its agent's watchdog), "ended" (its job did)

    def describe(self, phase: str) -> str:
        """One line for results: names the role, the phase and the cause."""
        cause = f": {self.cause}" if self.cause else ""
        if self.exit_code is not None:
            return f"{self.role} exited with code {self.exit_code} during {phase}, {self.after_s:.1f} s after launch{cause}"
        return f"{self.role} {self.what} during {phase} ({self.sign}, {self.after_s:.1f} s after launch){cause}"


class EngineDied(Exception):
    def __init__(self, death: RoleDeath) -> None:
        super().__init__(death.describe("the case"))
        self.death = death


class WatchedRole(Protocol):
    """What the watch asks of a role, local or remote."""

    def sign_of_death(self) -> tuple[str, int | None] | None: ...

    def death(self, sign: str, exit_code: int | None, seen_at: float, settle: threading.Event) -> RoleDeath: ...


class HealthProbe:
    """A role's ``/health``, local or over the network: after a first 200, any other answer, or connections refused
    for REFUSED_FOR_S on ``clock`` (the run's: a test moves it, so a loaded machine's slow polls decide nothing),
    is a sign of death."""

    def __init__(self, url: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.url = url
        self.clock = clock
        self.healthy = False
        self.refused_since: float | None = None

    def sign_of_death(self) -> str | None:
        status = http_status(self.url)
        if status == 200:
            self.healthy, self.refused_since = True, None
        elif self.healthy and status == REFUSED:
            now = self.clock()
            self.refused_since = now if self.refused_since is None else self.refused_since
            if now - self.refused_since >= REFUSED_FOR_S:
                return "/health stopped accepting connections"
        elif self.healthy and status is not None:
            return f"/health answered {status}"
        return None


class _Role:
    def __init__(
        self,
        server: ServerProcess,
        health_url: str,
        clock: Callable[[], float],
        sleep: Callable[[float], object] | None,
    ) -> None:
        self.server = server
        self.health = HealthProbe(health_url, clock)
        self.log = LogScanner(server.log_path)
        self._sleep = sleep

    def sign_of_death(self) -> tuple[str, int | None] | None:
        code = self.server.exit_code()
        if code is not None:
            return f"exited with code {code}", code
        if label := self.log.fatal():
            return f"log: {label}", None
        sign = self.health.sign_of_death()
        return (sign, None) if sign else None

    def death(self, sign: str, exit_code: int | None, seen_at: float, settle: threading.Event) -> RoleDeath:
        """The death seen, with the root cause from the role's log (given LOG_SETTLE_S to reach it: with the watch's
        ``sleep``, else on ``settle``, the watch's stop event, which ends it early)."""
        if exit_code is None:
            (settle.wait if self._sleep is None else self._sleep)(LOG_SETTLE_S)
        cause = root_cause(read_log_end(self.server.log_path))
        server = self.server
        return RoleDeath(server.name, sign, exit_code, cause, seen_at - server.launched_at, seen_at)


class EngineWatch:
    """A daemon thread watching every role of a case from launch until ``stop()``; the first death is kept."""

    def __init__(
        self,
        roles: Sequence[tuple[ServerProcess, str]],
        *,
        remote: Sequence[WatchedRole] = (),
        interval_s: float = WATCH_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        """``clock``: what a local role's refused ``/health`` is timed on (REFUSED_FOR_S); ``sleep``: how the watch
        lets a dead role's traceback reach its log (LOG_SETTLE_S; None: on its stop event). The run's, which tests
        drive. The polls themselves (``interval_s``) stay in real time: they only say how often to look."""
        self._roles: list[WatchedRole] = [*(_Role(server, url, clock, sleep) for server, url in roles), *remote]
        self._interval_s = interval_s
        self._stop = threading.Event()
        self.dead = threading.Event()
        self.death: RoleDeath | None = None
        self._thread = threading.Thread(target=self._run, name="afd-e2e-watch", daemon=True)

    def start(self) -> EngineWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching (before the case's own teardown, whose stopping servers are no deaths)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def check(self) -> None:
        """Raise EngineDied once a role has died."""
        if self.death is not None:
            raise EngineDied(self.death)

    def _run(self) -> None:
        while not self._stop.is_set():
            for role in self._roles:
                if self._stop.is_set():
                    return
                found = role.sign_of_death()
                if found is not None:
                    self._record(role, *found)
                    return
            self._stop.wait(self._interval_s)

    def _record(self, role: WatchedRole, sign: str, exit_code: int | None) -> None:
        self.death = role.death(sign, exit_code, time.monotonic(), self._stop)
        self.dead.set()
