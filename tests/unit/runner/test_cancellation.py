"""SIGTERM/SIGINT set the cancel flag instead of killing the runner; blocking work is abandoned promptly."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from afd_e2e.runner.cancellation import CancelFlag, Cancelled, call_cancellable, cancel_on_signals


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_sets_the_flag_with_its_name_and_handlers_are_restored(sig):
    before = signal.getsignal(sig)
    flag = CancelFlag()
    with cancel_on_signals(flag):
        os.kill(os.getpid(), sig)
        assert flag.wait(1.0)
    assert flag.reason == f"cancelled by {sig.name}"
    assert signal.getsignal(sig) is before


def test_cancellable_work_returns_its_value_or_raises_its_error():
    assert call_cancellable(lambda: 42, CancelFlag()) == 42
    with pytest.raises(ZeroDivisionError):
        call_cancellable(lambda: 1 / 0, CancelFlag())


def test_blocking_work_is_abandoned_once_cancelled():
    flag = CancelFlag()
    release = threading.Event()
    threading.Timer(0.1, flag.cancel, args=("cancelled by SIGINT",)).start()
    started = time.monotonic()

    with pytest.raises(Cancelled, match="cancelled by SIGINT"):
        call_cancellable(lambda: release.wait(30), flag)

    assert time.monotonic() - started < 0.5
    release.set()


def test_the_first_reason_is_kept():
    flag = CancelFlag()
    flag.cancel("cancelled by SIGTERM")
    flag.cancel("cancelled by SIGINT")

    assert flag.reason == "cancelled by SIGTERM"
