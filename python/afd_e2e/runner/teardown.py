"""Where servers are stopped: SIGTERM to every process group of the tree, poll until gone, SIGKILL after the grace.

Zombies count as gone (they hold no memory, ports or files). Each SIGTERM is followed by a SIGCONT, so a stopped
process (SIGSTOP, a stalled case's diagnosis) can act on it and exit instead of waiting for the SIGKILL. A SIGKILL escalation is reported so the case can fail
for it. The tree is found by markers, not by parentage, so re-parented descendants and those that started their own
session are stopped too; once the tree looks gone it is scanned once more for anything spawned during the stop.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass

import psutil

from afd_e2e.runner.cancellation import CANCEL_GRACE_S
from afd_e2e.system.markers import MarkedProcess, is_alive

POLL_INTERVAL_S = 0.05
AFTER_SIGKILL_WAIT_S = 5.0


@dataclass(frozen=True)
class TeardownOutcome:
    seconds: float
    forced: frozenset[str]  # names of the trees that needed SIGKILL
    survivors: tuple[str, ...]  # "pid N (name)" still alive even after SIGKILL


def signal_tree(members: Iterable[MarkedProcess], sig: signal.Signals) -> None:
    """Signal each member's process group (never this runner's own group), so unmarked group members get it too."""
    own_group = os.getpgrp()
    groups: set[int] = set()
    for member in members:
        try:
            group = os.getpgid(member.process.pid)
        except (ProcessLookupError, PermissionError):
            continue
        if group == own_group:
            with suppress(psutil.Error):
                member.process.send_signal(sig)
        else:
            groups.add(group)
    for group in groups:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)


class _Deadline:
    """When the grace ends: ``grace_s`` after the start, or CANCEL_GRACE_S after a cancel seen meanwhile."""

    def __init__(self, grace_s: float, cancel: threading.Event | None, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.at = clock() + grace_s
        self.cancel = cancel

    def passed(self) -> bool:
        now = self.clock()
        if self.cancel is not None and self.cancel.is_set():
            self.at = min(self.at, now + CANCEL_GRACE_S)
            self.cancel = None
        return now >= self.at


def _wait_gone(
    members: list[MarkedProcess], deadline: _Deadline, poll_s: float, sleep: Callable[[float], None]
) -> list[MarkedProcess]:
    """Poll until every member is gone or the deadline passes; return those still alive."""
    while True:
        alive = [m for m in members if is_alive(m.process)]
        if not alive or deadline.passed():
            return alive
        sleep(poll_s)


def terminate(
    find: Callable[[], list[MarkedProcess]],
    grace_s: float,
    *,
    cancel: threading.Event | None = None,
    poll_s: float = POLL_INTERVAL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> TeardownOutcome:
    """Stop everything ``find`` returns (and whatever appears while stopping); SIGKILL what outlives ``grace_s``
    (or CANCEL_GRACE_S after ``cancel`` is set during the stop: the job is about to be killed itself). The grace is
    read on ``clock`` and the polls wait with ``sleep`` (tests drive both)."""
    started = clock()
    deadline = _Deadline(grace_s, cancel, clock)
    members = find()
    alive: list[MarkedProcess] = []
    while members:
        signal_tree(members, signal.SIGTERM)
        signal_tree(members, signal.SIGCONT)  # a stopped (SIGSTOP) process acts on the SIGTERM only once continued
        alive = _wait_gone(members, deadline, poll_s, sleep)
        if alive:
            break
        members = find()  # anything spawned while the tree was stopping
    forced = frozenset(m.name for m in alive)
    if alive:
        signal_tree(alive, signal.SIGKILL)
        alive = _wait_gone(alive, _Deadline(AFTER_SIGKILL_WAIT_S, None, clock), poll_s, sleep)
    return TeardownOutcome(clock() - started, forced, tuple(m.describe() for m in alive))
