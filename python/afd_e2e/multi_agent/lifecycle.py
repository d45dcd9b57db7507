"""The leader's state in build meta-data, and the one decision a follower makes first: join, or exit at once.

A follower step is uploaded by its leader while the leader waits at the rendezvous, and an uploaded step cannot be
withdrawn: it may start after its leader gave up (its rendezvous budget ran out, it failed, it was cancelled).
So the leader publishes its state under ``leader_state_key`` (``waiting`` before it uploads, ``running`` once
every follower is ready, ``ended:<status>`` when it stops) and a follower joins only a leader that is waiting or
running; otherwise it exits at once, passing, saying there is nothing to join. A follower never holds an agent
for a leader that is gone, which is half of what keeps two builds from deadlocking (docs/agents.md: AFD across agents).

A side killed outright (SIGKILL, its agent lost) publishes no end. So while it lives each side also beats: a counter
every ``beat_every_s`` (``Heartbeat``): the leader under ``heartbeat_key``, a follower under its process's
``heartbeat`` key (``board.py``). A follower that sees no new beat of its leader for the profile's
``budgets.heartbeat_lost_s`` (``Pulse``) tears down and fails, instead of holding its agent until its step's time
limit; a leader that sees none of a follower fails its case naming the follower's agent (``remote.py``).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

from afd_e2e.buildkite import meta_data
from afd_e2e.errors import UsageError
from afd_e2e.plan.addresses import meta_data_key
from afd_e2e.profile.model import BudgetSpec
from afd_e2e.runner.side import SideFailed

WAITING, RUNNING, ENDED = "waiting", "running", "ended"
# budgets.heartbeat_lost_s's default, for a side built without a profile (the number's one home is BudgetSpec)
LOST_AFTER_S = BudgetSpec.heartbeat_lost_s
BEATS_MISSED = 6  # beats missed before a side is taken for gone: a meta-data write slowed by the API is not a lost side


def beat_every_s(lost_after_s: float) -> float:
    """How often a side beats, and its reader reads, when a reader takes it for gone after ``lost_after_s``."""
    return lost_after_s / BEATS_MISSED


HEARTBEAT_EVERY_S = beat_every_s(LOST_AFTER_S)


def leader_state_key(leader_job: str) -> str:
    return meta_data_key(leader_job, "leader")


def heartbeat_key(leader_job: str) -> str:
    return meta_data_key(leader_job, "heartbeat")


class Heartbeat:
    """One side's beat: ``1``, ``2``, ... under ``key`` every ``every_s``, from a daemon thread that dies with its
    process. A failed write is said and retried at the next beat."""

    def __init__(
        self, key: str, every_s: float = HEARTBEAT_EVERY_S, publish: Callable[[str, str], None] = meta_data.set_value
    ) -> None:
        self.key, self.every_s, self.publish = key, every_s, publish
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.beats = 0

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._beat, name="afd-e2e-heartbeat", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.every_s)

    def _beat(self) -> None:
        while not self._stop.is_set():
            try:
                self.publish(self.key, str(self.beats + 1))
                self.beats += 1
            except UsageError as exc:
                print(f"afd-e2e: heartbeat not published ({exc}); retrying in {self.every_s:g} s", file=sys.stderr)
            self._stop.wait(self.every_s)


class Pulse:
    """One side's reading of the other's heartbeat (``whose``: "the leader's", "its follower's"): how long since the
    value last changed, on the reader's own clock (agents' clocks need not agree). The first reading starts the
    count, beat or none. ``after_s``: the silence after which the other side is gone (``budgets.heartbeat_lost_s``)."""

    def __init__(self, now: float, whose: str = "the leader's", after_s: float = LOST_AFTER_S) -> None:
        self.value: str | None = None
        self.changed_at, self.whose, self.after_s = now, whose, after_s

    def silent_for(self, value: str | None, now: float) -> float:
        if value is not None and value != self.value:
            self.value, self.changed_at = value, now
        return now - self.changed_at

    def lost(self, value: str | None, now: float) -> str | None:
        """Why the other side is taken for gone (no new beat for ``after_s``), naming the budget that says how long
        is too long; None while it beats."""
        silent = self.silent_for(value, now)
        if silent <= self.after_s:
            return None
        last = f"beat {self.value}" if self.value is not None else "no beat at all"
        return (
            f"{self.whose} heartbeat stopped ({last}, nothing new for {silent:.0f} s, over budgets.heartbeat_lost_s "
            f"= {self.after_s:g} s): killed, or its agent lost"
        )


class LeaderLost(SideFailed):
    """A follower's leader stopped beating without ending its case: the follower tears down and fails."""


def ended(status: str) -> str:
    """The state a leader leaves: ``ended:passed``, ``ended:failed``, ``ended:cancelled``, ..."""
    return f"{ENDED}:{status}"


@dataclass(frozen=True)
class JoinDecision:
    join: bool
    reason: str


def join_decision(leader_job: str, state: str | None) -> JoinDecision:
    """Whether a follower of ``leader_job`` joins, given the leader's state in meta-data (None: none published)."""
    if state in (WAITING, RUNNING):
        return JoinDecision(True, f"leader job {leader_job} is {state}: joining its rendezvous")
    if state is None or state == "":
        return JoinDecision(False, f"leader job {leader_job} published no state: nothing to join")
    if state.startswith(f"{ENDED}:") or state == ENDED:
        how = state.partition(":")[2] or "ended"
        return JoinDecision(False, f"leader job {leader_job} has already ended ({how}): nothing to join")
    return JoinDecision(False, f"leader job {leader_job} is in an unknown state {state!r}: nothing to join")
