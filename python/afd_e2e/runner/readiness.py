"""Where readiness is detected: poll the readiness URL every 50 ms and, on every poll, notice a server that exited.

A server that dies during start-up fails the case at once with its log tail instead of waiting out the start-up
timeout (which is an hour for a large checkpoint). Before vLLM listens, a connection is refused at once, so a poll
costs well under a millisecond.
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.processes import ServerProcess

POLL_INTERVAL_S = 0.05
CONNECT_TIMEOUT_S = 0.25
ANSWER_TIMEOUT_S = 1.0


class ServerExited(Exception):
    def __init__(self, server: ServerProcess, exit_code: int, after_s: float) -> None:
        self.server = server
        self.exit_code = exit_code
        self.after_s = after_s
        super().__init__(f"{server.name} exited with code {exit_code} during start-up, {after_s:.1f} s after launch")


class StartupTimeout(Exception):
    pass


def answers_ok(url: str) -> bool:
    """True when ``GET url`` answers 200 now."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=CONNECT_TIMEOUT_S)
    try:
        connection.connect()
        connection.sock.settimeout(ANSWER_TIMEOUT_S)
        connection.request("GET", parts.path or "/")
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def wait_until_ready(
    url: str,
    servers: Sequence[ServerProcess],
    timeout_s: float,
    flag: CancelFlag,
    *,
    interval_s: float = POLL_INTERVAL_S,
) -> float:
    """Block until ``url`` answers 200; return the seconds since the first launch.

    Raises ServerExited (any server exited), StartupTimeout, or Cancelled.
    """
    started = min(server.launched_at for server in servers)
    while True:
        for server in servers:
            code = server.exit_code()
            if code is not None:
                raise ServerExited(server, code, time.monotonic() - server.launched_at)
        flag.check()
        if answers_ok(url):
            return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            raise StartupTimeout(f"{url} did not answer 200 within the start-up timeout of {timeout_s:.0f} s")
        flag.wait(interval_s)
