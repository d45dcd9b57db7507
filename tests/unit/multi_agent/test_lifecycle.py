"""The leader's heartbeat and what a follower makes of it: a leader killed outright (no end published) is taken for
gone after LOST_AFTER_S without a new beat, and a follower that failed on its own side gives the leader time to end
its requests before it stops its process."""

from __future__ import annotations

import time

from afd_e2e.buildkite import meta_data
from afd_e2e.errors import UsageError
from afd_e2e.multi_agent.board import Board
from afd_e2e.multi_agent.follower import WIND_DOWN_S, Follower
from afd_e2e.multi_agent.lifecycle import LOST_AFTER_S, Heartbeat, Pulse, ended, heartbeat_key, leader_state_key
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
        "the leader's heartbeat stopped (beat 2, nothing new for 31 s): killed, or its agent lost"
    )
    assert "no beat at all" in (Pulse(now=0.0).lost(None, 31.0) or "")


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
    beat.stop()
    count = len(written)
    assert beat._thread is not None and not beat._thread.is_alive()  # stopped: its thread is gone, no more beats
    assert len(written) == count
    assert written[:3] == [(heartbeat_key("job-L"), "1"), (heartbeat_key("job-L"), "2"), (heartbeat_key("job-L"), "3")]
    assert heartbeat_key("job-L") == "afd-e2e/job-L/heartbeat"


def follower(progress: list[str], clock=time.monotonic, on_progress=None) -> Follower:
    def said(line: str) -> None:
        progress.append(line)
        if on_progress is not None:
            on_progress(line)

    side = Follower(
        "job-L", "server", {"BUILDKITE_AGENT_NAME": "follower-1"}, model_path="/m", rendezvous_s=5,
        progress=said, clock=clock,
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
