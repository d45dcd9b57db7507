"""Unit tier: SIGTERM/SIGINT set the cancel flag instead of killing the runner; blocking work is abandoned once a
check fails, and told to stop (it stops waiting at once, not when its own 30 s wait ends)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from afd_e2e.runner.cancellation import (
    STOP_JOIN_S,
    WATCH_INTERVAL_S,
    CancelFlag,
    Cancelled,
    call_watched,
    cancel_on_signals,
)
from unit.timing import GUARD_S, FakeClock, wait_until


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_sets_the_flag_with_its_name_and_handlers_are_restored(sig):
    before = signal.getsignal(sig)
    flag = CancelFlag()
    with cancel_on_signals(flag):
        os.kill(os.getpid(), sig)
        assert flag.wait(30)
    assert flag.reason == f"cancelled by {sig.name}"
    assert signal.getsignal(sig) is before


def test_watched_work_returns_its_value_or_raises_its_error():
    assert call_watched(lambda: 42, [CancelFlag().check], threading.Event()) == 42
    with pytest.raises(ZeroDivisionError):
        call_watched(lambda: 1 / 0, [CancelFlag().check], threading.Event())


def test_blocking_work_is_abandoned_once_cancelled_and_told_to_stop():
    flag = CancelFlag()
    stop = threading.Event()
    told: list[bool] = []

    def work():  # blocks for 30 s unless told to stop; the cancel arrives while it blocks
        flag.cancel("cancelled by SIGINT")
        told.append(stop.wait(30))

    with pytest.raises(Cancelled, match="cancelled by SIGINT"):
        call_watched(work, [flag.check], stop)

    assert stop.is_set()
    wait_until(lambda: told, what="the work's return")
    assert told == [True]  # the work stopped on its stop event, not at the end of its own 30 s wait


def test_any_failing_check_abandons_the_work():
    stop = threading.Event()
    looks = []

    def within_budget():  # a budget that runs out at the third look
        looks.append(1)
        if len(looks) >= 3:
            raise TimeoutError("over budget")

    with pytest.raises(TimeoutError, match="over budget"):
        call_watched(lambda: stop.wait(30), [CancelFlag().check, within_budget], stop)
    assert stop.is_set() and len(looks) == 3


def test_the_first_reason_is_kept():
    flag = CancelFlag()
    flag.cancel("cancelled by SIGTERM")
    flag.cancel("cancelled by SIGINT")

    assert flag.reason == "cancelled by SIGTERM"


def test_abandoned_work_that_will_not_stop_gets_its_wind_down_on_the_runs_clock():
    """The work ignores its stop event: the wind-down (STOP_JOIN_S) is waited out on the run's clock, in its steps,
    and the check's exception propagates; no real second passes however slow the machine."""
    flag = CancelFlag()
    release = threading.Event()
    clock = FakeClock()

    def work():
        flag.cancel("cancelled by SIGTERM")
        release.wait(GUARD_S)

    try:
        with pytest.raises(Cancelled):
            call_watched(work, [flag.check], threading.Event(), clock=clock, sleep=clock.sleep)
    finally:
        release.set()
    assert clock.elapsed == pytest.approx(STOP_JOIN_S)
    assert max(clock.sleeps) <= WATCH_INTERVAL_S


def test_abandoned_work_that_stops_ends_the_wind_down_early():
    """The clock moves only once the work's thread has ended on its stop event (``settle``): the wind-down then ends
    at its next look, not when STOP_JOIN_S is out."""
    flag = CancelFlag()
    stop = threading.Event()
    worker: list[threading.Thread] = []
    clock = FakeClock(settle=lambda: wait_until(lambda: not worker[0].is_alive(), what="the work's end"))

    def work():
        worker.append(threading.current_thread())
        flag.cancel("cancelled by SIGTERM")
        stop.wait(GUARD_S)

    with pytest.raises(Cancelled):
        call_watched(work, [flag.check], stop, clock=clock, sleep=clock.sleep)
    assert clock.elapsed <= WATCH_INTERVAL_S  # one look at most (none when the work had ended before it)
