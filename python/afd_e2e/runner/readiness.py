"""Where readiness is detected: poll the readiness URL every 50 ms while the case's watch looks for a dead role.

A role that dies during start-up (its process exits, or its engine dies while its API process lives) fails the case
at once with its root cause instead of waiting out the start-up budget (an hour for a large checkpoint). Before vLLM
listens, a connection is refused at once, so a poll costs well under a millisecond.
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable, Sequence
from typing import Protocol
from urllib.parse import urlsplit

from afd_e2e.runner.cancellation import CancelFlag

POLL_INTERVAL_S = 0.05
CONNECT_TIMEOUT_S = 0.25
ANSWER_TIMEOUT_S = 1.0
REFUSED = -1  # http_status: nothing listens on the port


class StartupTimeout(Exception):
    pass


class Watch(Protocol):
    """The case's watch (``runner/watch.py``'s ``EngineWatch``, which reads this module's statuses): ``check`` raises
    when a role has died."""

    def check(self) -> None: ...


def http_status(url: str) -> int | None:
    """The status ``GET url`` answers now; REFUSED when nothing listens, None when no answer came in time."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=CONNECT_TIMEOUT_S)
    try:
        connection.connect()
        connection.sock.settimeout(ANSWER_TIMEOUT_S)
        connection.request("GET", parts.path or "/")
        return connection.getresponse().status
    except ConnectionRefusedError:
        return REFUSED
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()


def answers_ok(url: str) -> bool:
    """True when ``GET url`` answers 200 now."""
    return http_status(url) == 200


def wait_until_ready(
    url: str,
    watch: Watch,
    started: float,
    budget_s: float,
    flag: CancelFlag,
    *,
    interval_s: float = POLL_INTERVAL_S,
    checks: Sequence[Callable[[], None]] = (),
    clock: Callable[[], float] = time.monotonic,
) -> float:
    """Block until ``url`` answers 200; return the seconds since ``started`` (the first launch, on ``clock``: the
    budget is read on the clock a test drives, so a slow machine never runs it out).

    Raises EngineDied (a role died), StartupTimeout (the ``budgets.startup_s`` budget ran out), Cancelled, or what
    one of ``checks`` raises (the watchdog's start-up stall).
    """
    while True:
        watch.check()
        flag.check()
        for check in checks:
            check()
        if answers_ok(url):
            return clock() - started
        if clock() - started > budget_s:
            raise StartupTimeout(
                f"{url} did not answer 200 within its start-up budget (budgets.startup_s = {budget_s:g} s)"
            )
        flag.wait(interval_s)
