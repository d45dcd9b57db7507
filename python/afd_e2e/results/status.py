"""The one status vocabulary of results.json, for runs, cases, phases and every check (hygiene, preflight, cleanup),
and the direction word a performance metric gets. Reports read these enums; nothing translates status words."""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    RUNNING = "running"  # not finished when the results were last written
    PASSED = "passed"
    FAILED = "failed"  # measured and found wanting
    WARNED = "warned"  # a check that passed with a caveat
    SKIPPED = "skipped"  # not applicable or not run, with the reason beside it
    CANCELLED = "cancelled"  # stopped by SIGTERM/SIGINT (a cancelled job)
    CRASHED = "crashed"  # the harness or engine broke: not a measured failure
    INTERRUPTED = "interrupted"  # the runner vanished (SIGKILL, lost agent); found and closed by `afd-e2e cleanup`

    def __str__(self) -> str:
        return self.value

    @property
    def is_failure(self) -> bool:
        return self in (Status.FAILED, Status.CRASHED)

    @property
    def unfinished(self) -> bool:
        """The run stopped before this reached an outcome of its own."""
        return self in (Status.RUNNING, Status.CANCELLED, Status.INTERRUPTED)


class Verdict(str, Enum):
    """A performance metric's direction: candidate ``better`` or ``worse`` than the baseline beyond noise and
    threshold, else ``parity``."""

    BETTER = "better"
    WORSE = "worse"
    PARITY = "parity"

    def __str__(self) -> str:
        return self.value
