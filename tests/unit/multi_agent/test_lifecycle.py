"""The leader's heartbeat and what a follower makes of it: a leader killed outright (no end published) is taken for
gone after ``budgets.heartbeat_lost_s`` (LOST_AFTER_S by default) without a new beat, and a follower that failed on its
own side gives the leader time to end its requests before it stops its process."""

from __future__ import annotations

import time

from afd_e2e.buildkite import meta_data
from afd_e2e.errors import UsageError
from afd_e2e.multi_agent.board import Board
from afd_e2e.multi_agent.follower import WIND_DOWN_S, Follower
from afd_e2e.multi_agent.lifecycle import (
    HEARTBEAT_EVERY_S,
    LOST_AFTER_S,
    Heartbeat,
    Pulse,
    beat_every_s,
    ended,
    heartbeat_key,
    leader_state_key,
)
from afd_e2e.results.model import CaseResults
from afd_e2e.results.status import Status
from afd_e2e.runner.cancellation import CancelFlag
from unit.timing import FakeClock, wait_until

CASE = "cpu-tp1-remote"


def test_a_pulse_counts_silence_on_the_followers_own_clock_from_the_last_new_beat():
    pulse = Pulse(now=100.0)
    assert pulse.lost(None, 100.0 + LOST_AFTER_S) is None  # no beat yet: counted from the first reading
    assert pulse.lost("1", 131.0) is None and pulse.changed_at == 131.0
    assert pulse.lost("1", 131.0 + LOST_AFTER_S) is None  # just within
    assert pulse.lost("2", 170.0) is None  # a new beat resets the count
    assert pulse.lost("2", 201.0) == (
        "the leader's heartbeat stopped (beat 2, nothing new for 31 s, over budgets.heartbeat_lost_s = 30 s): "
        "killed, or its agent lost"
    )
    assert "no beat at all" in (Pulse(now=0.0).lost(None, 31.0) or "")


def test_a_pulse_given_a_shorter_budget_takes_the_side_for_gone_after_it_and_says_which_budget():
    pulse = Pulse(now=0.0, whose="its follower's", after_s=10.0)
    assert pulse.lost("1", 0.0) is None and pulse.lost("1", 10.0) is None  # just within
    assert pulse.lost("1", 11.0) == (
        "its follower's heartbeat stopped (beat 1, nothing new for 11 s, over budgets.heartbeat_lost_s = 10 s): "
        "killed, or its agent lost"
    )


def test_a_side_beats_every_sixth_of_the_budget_so_six_beats_are_missed_before_it_is_lost():
    assert (LOST_AFTER_S, HEARTBEAT_EVERY_S) == (30.0, 5.0)  # the default: today's cadence
    assert beat_every_s(12.0) == 2.0


def test_the_heartbeat_counts_up_until_stopped_and_retries_a_failed_write():
    written: list[tuple[str, str]] = []
    failures = iter([UsageError("buildkite-agent meta-data set: timed out", "retry")])

    def publish(key: str, value: str) -> None:
        if len(written) == 1 and (failure := next(failures, None)) is not None:
            raise failure
        written.append((key, value))

    beat = Heartbeat(heartbeat_key("job-L"), every_s=0.01, publish=publish)
    beat.start()
    wait_until(lambda: len(written) >= 3, what="three beats")
    beat.stop()  # joins for one period only (a hung write must not hold the run): the thread ends when it next runs
    assert beat._thread is not None
    wait_until(lambda: not beat._thread.is_alive(), what="the heartbeat's thread ending once stopped")
    assert written[:3] == [(heartbeat_key("job-L"), "1"), (heartbeat_key("job-L"), "2"), (heartbeat_key("job-L"), "3")]
    assert heartbeat_key("job-L") == "afd-e2e/job-L/heartbeat"


def follower(progress: list[str], clock=time.monotonic, on_progress=None, **budgets: float) -> Follower:
    def said(line: str) -> None:
        progress.append(line)
        if on_progress is not None:
            on_progress(line)

    side = Follower(
        "job-L", "server", {"BUILDKITE_AGENT_NAME": "follower-1"}, model_path="/m", rendezvous_s=5,
        progress=said, clock=clock, **budgets,
    )  # fmt: skip
    side.board = Board("job-L", CASE)
    return side


def test_a_follower_takes_a_silent_leader_for_lost_and_an_ended_run_for_ended(build):
    meta_data.set_value(heartbeat_key("job-L"), "7")
    side = follower([])
    assert side._leader_gone() is None and not side.leader_lost  # beat 7 seen now

    silent = follower([])
    silent.pulse = Pulse(now=time.monotonic() - LOST_AFTER_S - 1)  # its first reading, over 30 s ago
    silent.pulse.value = "7"  # and the beat has not changed since
    why = silent._leader_gone()
    assert why is not None and why.startswith("leader job job-L: the leader's heartbeat stopped (beat 7")
    assert silent.leader_lost

    meta_data.set_value(leader_state_key("job-L"), ended("failed"))
    done = follower([])
    assert done._leader_gone() == "the leader's run ended (failed)" and not done.leader_lost


def test_a_follower_given_a_shorter_budget_beats_reads_and_loses_its_leader_by_it(build):
    """budgets.heartbeat_lost_s = 12: it beats and reads the leader's beat every 2 s, and the leader is lost once
    12 s pass on its own clock with no new beat (30 s would still be within)."""
    clock = FakeClock()
    meta_data.set_value(heartbeat_key("job-L"), "7")
    side = follower([], clock=clock, heartbeat_lost_s=12)
    assert (side.beat_every_s, side.read_every_s) == (2.0, 2.0)  # its own Heartbeat's period, its reads'
    assert side._leader_gone() is None  # beat 7 seen at 0 s
    clock.advance(12)
    assert side._leader_gone() is None  # 12 s: just within
    clock.advance(1)
    assert side._leader_gone() is None  # 13 s, but 1 s after its last read: not read again yet
    clock.advance(1)
    why = side._leader_gone()
    assert why == (
        "leader job job-L: the leader's heartbeat stopped (beat 7, nothing new for 14 s, over "
        "budgets.heartbeat_lost_s = 12 s): killed, or its agent lost"
    )
    assert side.leader_lost
    assert follower([]).read_every_s == 5.0  # the default budget reads as before: every RUN_EVERY_S


class LeaderEndsAtTheFirstWait(CancelFlag):
    """A follower's cancel flag (never set) whose first wait is when the leader ends its case: the end comes while
    the follower waits for it, not after some real seconds; no wait sleeps."""

    def __init__(self, end) -> None:
        super().__init__()
        self.end = end
        self.waits: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        if len(self.waits) == 1:
            self.end()
        return self.is_set()


def test_a_failed_follower_waits_for_the_leader_to_end_its_case_before_its_teardown(build):
    progress: list[str] = []
    events: list[str] = []
    ticks = FakeClock()

    def clock() -> float:  # each reading 0.1 s later: the wind-down's deadline is 10 * WIND_DOWN_S looks away
        ticks.advance(0.1)
        return ticks()

    board = Board("job-L", CASE)
    side = follower(progress, clock=clock)
    side.flag = LeaderEndsAtTheFirstWait(lambda: (events.append("leader ended"), board.publish_end("failed")))
    meta_data.set_value(heartbeat_key("job-L"), "1")
    side.case_over(CaseResults(CASE, "cpu", "native", status=Status.FAILED, failure="server stalled"))
    events.append("teardown may start")

    assert events == ["leader ended", "teardown may start"]  # it waited until the leader ended its case
    assert side.flag.waits == [0.5]  # one wait, during which the leader ended; it went on at its next look
    assert ticks.elapsed < WIND_DOWN_S  # and went on then, not at the end of the whole WIND_DOWN_S
    assert progress == [f"waiting up to {WIND_DOWN_S:g} s for the leader to end its requests before the teardown"]


def test_a_cancelled_or_passed_follower_tears_down_at_once(build):
    for status in (Status.CANCELLED, Status.PASSED):
        progress: list[str] = []
        follower(progress).case_over(CaseResults(CASE, "cpu", "native", status=status))
        assert progress == []  # no wind-down began: its first act is to say it waits
