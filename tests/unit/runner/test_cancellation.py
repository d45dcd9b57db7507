"""SIGTERM/SIGINT set the cancel flag instead of killing the runner; blocking work is abandoned promptly."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from afd_e2e.runner.cancellation import CancelFlag, Cancelled, call_watched, cancel_on_signals


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_sets_the_flag_with_its_name_and_handlers_are_restored(sig):
    before = signal.getsignal(sig)
    flag = CancelFlag()
    with cancel_on_signals(flag):
        os.kill(os.getpid(), sig)
        assert flag.wait(1.0)
    assert flag.reason == f"cancelled by {sig.name}"
    assert signal.getsignal(sig) is before


def test_watched_work_returns_its_value_or_raises_its_error():
    assert call_watched(lambda: 42, [CancelFlag().check], threading.Event()) == 42
    with pytest.raises(ZeroDivisionError):
        call_watched(lambda: 1 / 0, [CancelFlag().check], threading.Event())


def test_blocking_work_is_abandoned_once_cancelled_and_told_to_stop():
    flag = CancelFlag()
    stop = threading.Event()
    threading.Timer(0.1, flag.cancel, args=("cancelled by SIGINT",)).start()
    started = time.monotonic()

    with pytest.raises(Cancelled, match="cancelled by SIGINT"):
        call_watched(lambda: stop.wait(30), [flag.check], stop)

    assert stop.is_set()  # the work saw its stop event and ended inside the join
    assert time.monotonic() - started < 0.5


def test_any_failing_check_abandons_the_work():
    stop = threading.Event()
    deadline = time.monotonic() + 0.2

    def within_budget():
        if time.monotonic() > deadline:
            raise TimeoutError("over budget")

    with pytest.raises(TimeoutError, match="over budget"):
        call_watched(lambda: stop.wait(30), [CancelFlag().check, within_budget], stop)
    assert stop.is_set()


def test_the_first_reason_is_kept():
    flag = CancelFlag()
    flag.cancel("cancelled by SIGTERM")
    flag.cancel("cancelled by SIGINT")

    assert flag.reason == "cancelled by SIGTERM"
