"""How a run is cancelled: SIGTERM or SIGINT (what Buildkite sends) sets a flag every wait in the runner watches.

The signal never interrupts the runner mid-step (no KeyboardInterrupt inside a teardown); blocking work such as
HTTP requests runs in a worker thread that the main thread abandons once a check fails (the flag is set, a server
died, a budget ran out): the work's stop event is set so it ends what it started (a ``vllm bench serve``), then the
teardown of the servers unblocks whatever still waits on them.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")
CANCEL_SIGNALS = (signal.SIGTERM, signal.SIGINT)
CANCEL_GRACE_S = 5.0  # Buildkite SIGKILLs a cancelled job 10 s after SIGTERM: leave time to write the results
WATCH_INTERVAL_S = 0.05
STOP_JOIN_S = 2.0  # how long abandoned work gets to end what it started (a bench subprocess) before teardown


class Cancelled(Exception):
    """Raised in the runner's main thread once the cancel flag is seen."""


class CancelFlag(threading.Event):
    """A ``threading.Event`` that also remembers why it was set."""

    reason = ""

    def cancel(self, reason: str) -> None:
        if not self.is_set():
            self.reason = reason
        self.set()

    def check(self) -> None:
        if self.is_set():
            raise Cancelled(self.reason)


@contextmanager
def cancel_on_signals(flag: CancelFlag) -> Iterator[CancelFlag]:
    """Route SIGTERM/SIGINT to ``flag`` for the block (only the main thread may install handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum: int, _frame: object) -> None:
        flag.cancel(f"cancelled by {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, handler) for sig in CANCEL_SIGNALS}
    try:
        yield flag
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def call_watched(
    work: Callable[[], T],
    checks: Sequence[Callable[[], None]],
    stop: threading.Event,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] | None = None,
) -> T:
    """Run ``work`` in a daemon thread and return its result or re-raise its error; every WATCH_INTERVAL_S run
    ``checks``, each of which raises to abandon the work: then ``stop`` is set, the work gets STOP_JOIN_S to wind
    down, and the check's exception propagates. The wind-down is read on the run's ``clock`` and waited with its
    ``sleep`` (tests drive both); without a ``sleep`` it is a join of the worker, in real time."""
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc

    worker = threading.Thread(target=target, name="afd-e2e-work", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            for check in checks:
                check()
            worker.join(WATCH_INTERVAL_S)
    except BaseException:
        stop.set()
        _wind_down(worker, clock, sleep)
        raise
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


def _wind_down(worker: threading.Thread, clock: Callable[[], float], sleep: Callable[[float], object] | None) -> None:
    """Give abandoned work STOP_JOIN_S to end, returning as soon as it has."""
    if sleep is None:
        worker.join(STOP_JOIN_S)
        return
    deadline = clock() + STOP_JOIN_S
    while worker.is_alive() and (left := deadline - clock()) > 0:
        sleep(min(WATCH_INTERVAL_S, left))
