"""Where ports are checked: is a TCP port free, and which process holds it if not; and where this process lets go of
its own connections to one (``shut_own_connections``).

Uses psutil's socket table (no ``ss``/``lsof`` on the GPU agents) and, as the final word, a bind attempt.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Iterable

import psutil

from afd_e2e.system.pids import describe_pid

ANY_HOST = "0.0.0.0"  # a port checked here is free on every interface (where the address is another agent's to fill)


def _holders(ports: set[int]) -> dict[int, str]:
    holders: dict[int, str] = {}
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, PermissionError):
        return holders
    for conn in connections:
        if conn.laddr and conn.laddr.port in ports and conn.status in (psutil.CONN_LISTEN, psutil.CONN_ESTABLISHED):
            holders.setdefault(conn.laddr.port, describe_pid(conn.pid) if conn.pid else "unknown process")
    return holders


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def busy_ports(ports: Iterable[int], host: str = "127.0.0.1") -> dict[int, str]:
    """Ports that cannot be bound on ``host``, each with who holds it (``pid N (name)`` when known)."""
    wanted = set(ports)
    holders = _holders(wanted)
    busy = {}
    for port in sorted(wanted):
        if port in holders or not _bindable(host, port):
            busy[port] = holders.get(port, "unknown process")
    return busy


def shut_own_connections(port: int) -> int:
    """Shut down (both ways) this process's established TCP connections to ``port``; how many. An abandoned phase's
    requests (a stall, a budget, a cancel) stay blocked on theirs, and a vLLM server stopped with SIGTERM waits for
    open connections to close (uvicorn's graceful shutdown) until it is SIGKILLed. The blocked threads wake with an
    error; the connection is shut through a duplicate descriptor, so their own is closed by them."""
    shut = 0
    try:
        connections = psutil.Process().net_connections(kind="tcp")
    except (psutil.AccessDenied, PermissionError):
        return 0
    for conn in connections:
        if conn.raddr and conn.raddr.port == port and conn.fd >= 0 and conn.status == psutil.CONN_ESTABLISHED:
            try:
                with socket.socket(fileno=os.dup(conn.fd)) as duplicate:
                    duplicate.shutdown(socket.SHUT_RDWR)
            except OSError:
                continue
            shut += 1
    return shut
