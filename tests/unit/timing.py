"""Time in the unit tier: a fake clock the test drives, and waiting on a condition instead of a fixed sleep.

No unit test asserts a wall-clock bound or sleeps a fixed time: the code under test takes a ``clock`` (and a
``sleep``) and the test hands it a ``FakeClock``, so a deadline fires when the test's clock says so, however slow
the machine; a test that needs a real process to get somewhere waits for that with ``wait_until``, whose deadline
is only a guard against a hang (generous: a loaded 2-core machine is slow, never wrong). Figures of speed are
measured in benchmarks/, not asserted here.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import psutil

GUARD_S = 30.0  # a condition not met by then is a hang, not a slow machine


def wait_until(predicate: Callable[[], object], timeout: float = GUARD_S, what: str = "the condition") -> None:
    """Return once ``predicate()`` is true; fail the test (AssertionError naming ``what``) after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        time.sleep(0.01)


def wait_for_status(pid: int, status: str) -> None:
    """Wait until ``pid`` is in ``status``: a state letter is one instant's, so a test reads a process only once it
    has reached the state it is in for good (a sleeper still starting up reads "running" on a loaded machine)."""
    wait_until(lambda: psutil.Process(pid).status() == status, what=f"pid {pid} {status}")


def eventually(predicate: Callable[[], object], timeout: float = GUARD_S) -> bool:
    """``wait_until`` that answers instead of failing: whether ``predicate()`` became true within ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class FakeClock:
    """A monotonic clock that moves only when the code under test sleeps on it (``sleep``) or the test advances it.

    ``settle`` (optional) runs before each sleep's advance: it waits, in real time, for what the real world must do
    first (a process to exit on SIGTERM), so the clock never runs ahead of it on a slow machine."""

    def __init__(self, start: float = 1000.0, settle: Callable[[], object] | None = None) -> None:
        self.now = start
        self.start = start
        self.settle = settle
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        if self.settle is not None:
            self.settle()
        self.sleeps.append(seconds)
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        self.now += max(0.0, seconds)

    @property
    def elapsed(self) -> float:
        return self.now - self.start
