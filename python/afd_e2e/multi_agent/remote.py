"""A role on another agent, watched from the leader like a local one (``runner/watch.py``'s loop).

Three signs, whichever comes first: the role's own ``/health`` over the network (after a first 200, anything else or
a refused connection for a second is a death), the state its follower publishes from its own agent (a death seen
there, a stall its watchdog found, a follower that ended), and the follower's heartbeat (a follower killed outright
publishes nothing, and its process may stay up without anyone watching it: ``lifecycle.Pulse``, silent for
``budgets.heartbeat_lost_s``, read as often as the follower beats). The cause quoted
is the follower's: after a death seen on ``/health`` the follower's state is awaited a moment for its root-cause
line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from afd_e2e.multi_agent.board import ENDED, STALLED, Board, RoleState
from afd_e2e.multi_agent.lifecycle import LOST_AFTER_S, Pulse, beat_every_s
from afd_e2e.runner.watch import HealthProbe, RoleDeath

STATE_EVERY_S = 1.0  # meta-data is read at most this often (each read is a buildkite-agent call)
CAUSE_WAIT_S = 2.0  # after a death seen on /health: how long to wait for the follower's own reason


class RemoteRole:
    """``process`` of the case, hosted by the follower on ``agent`` and reached at ``health_url``."""

    def __init__(
        self,
        process: str,
        agent: str,
        health_url: str,
        board: Board,
        *,
        ready_at: float,
        lost_after_s: float = LOST_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``lost_after_s``: the follower's silence after which it is lost (``budgets.heartbeat_lost_s``); its beat
        is read every sixth of it, as often as it beats. ``clock``: what the reads and that silence are measured on
        (tests drive it)."""
        self.process, self.agent, self.board = process, agent, board
        self.health = HealthProbe(health_url, clock)
        self.ready_at = ready_at  # when the leader saw the follower ready (monotonic)
        self.clock = clock
        self._state_read_at = 0.0
        self.state: RoleState | None = None
        self.pulse = Pulse(clock(), "its follower's", lost_after_s)
        self._beat_every_s, self._beat_read_at = beat_every_s(lost_after_s), float("-inf")
        self.lost = False  # its follower's heartbeat stopped: no state will come from it

    @property
    def name(self) -> str:
        return f"{self.process} on agent {self.agent}"

    def _read_state(self, *, now: bool = False) -> RoleState | None:
        if now or self.clock() - self._state_read_at >= STATE_EVERY_S:
            self._state_read_at = self.clock()
            self.state = self.board.state(self.process)
        return self.state

    def sign_of_death(self) -> tuple[str, int | None] | None:
        state = self._read_state()
        if state is not None and (state.failed or state.kind == ENDED):
            return f"its follower reports it {state.kind}", None
        sign = self.health.sign_of_death()
        if sign is None and self.clock() - self._beat_read_at >= self._beat_every_s:
            self._beat_read_at = self.clock()
            sign = self.pulse.lost(self.board.get(self.board.heartbeat_key(self.process)), self._beat_read_at)
            self.lost = sign is not None
        return (sign, None) if sign else None

    def death(self, sign: str, exit_code: int | None, seen_at: float, settle: threading.Event) -> RoleDeath:
        state = self.state
        deadline = time.monotonic() + CAUSE_WAIT_S
        while (
            not self.lost
            and (state is None or not (state.failed or state.kind == ENDED))
            and time.monotonic() < deadline
        ):
            if settle.wait(0.25):
                break
            state = self._read_state(now=True)
        cause = state.detail if state is not None and (state.failed or state.kind == ENDED) else ""
        what = {STALLED: "stalled", ENDED: "ended"}.get(state.kind if state is not None else "", "engine died")
        if self.lost:
            what = "lost its follower"
        return RoleDeath(self.name, sign, exit_code, cause, seen_at - self.ready_at, seen_at, what=what)
