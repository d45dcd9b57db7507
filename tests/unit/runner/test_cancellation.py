"""Unit tier: SIGTERM/SIGINT set the cancel flag instead of killing the runner; blocking work is abandoned once a
check fails, and told to stop (it stops waiting at once, not when its own 30 s wait ends)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from afd_e2e.runner.cancellation import CancelFlag, Cancelled, call_watched, cancel_on_signals
from unit.timing import wait_until


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
