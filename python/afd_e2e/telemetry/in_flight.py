"""Requests in flight, counted on the workload's side: the client connections open to a role's API port.

Every workload of a case (the harness's own requests, the ``vllm bench serve`` client, lm-eval) talks HTTP to the
API port; a request sent and not yet answered holds its connection open. The engine's own gauge cannot be trusted
when no token moves: a stopped EngineCore leaves ``vllm:num_requests_running`` at its last snapshot (read 0 on the
CPU engine while the bench client still waited), so the sampler counts here then (and reads the gauge while tokens
move). An idle keep-alive connection is closed by the server after 5 s (uvicorn's default,
vLLM's ``VLLM_HTTP_TIMEOUT_KEEP_ALIVE``), far below any ``budgets.stall_s``; a probe's short-lived connection never
lasts a stall's length.

Read through the kernel's sock_diag netlink interface, asking for established TCP sockets only (this process's
network namespace, the workloads' too): reading ``/proc/net/tcp`` costs ~7 ms on an agent holding a few hundred
TIME_WAIT sockets, which alone would spend 0.7% of a core at 1 Hz. The dump still walks the kernel's whole
established-socket hash (~2-3 ms for both families on a large-memory machine, however few sockets there are).
``/proc/net/tcp{,6}`` is the fallback.

A follower agent hosting the API of a case placed on several agents has no client of it: the workloads run on the
leader's agent. It counts the server's side instead (``server_connections``: the accepted connections on the API
port), which also holds an idle keep-alive connection for those 5 s.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path

TCP_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
ESTABLISHED = "01"
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST_DUMP = 0x1 | 0x300
_NLMSG_DONE, _NLMSG_ERROR = 3, 2
_TCP_ESTABLISHED = 1
_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, seq, pid
_REQUEST = struct.Struct("=BBBBI56x")  # inet_diag_req_v2: family, protocol, ext, pad, states, sockid (zeroed)
_SPORT_OFFSET = 4  # in inet_diag_msg: family, state, timer, retrans, then sockid's sport, dport (big-endian)
_DPORT_OFFSET = _SPORT_OFFSET + 2
LOCAL, REMOTE = 1, 2  # the columns of a /proc/net/tcp row holding the local and the remote address


def client_connections(port: int) -> int:
    """Established connections whose far end is ``port`` (the client side of each connection to it)."""
    try:
        return sum(_netlink_count(family, port, _DPORT_OFFSET) for family in (socket.AF_INET, socket.AF_INET6))
    except OSError:
        return sum(_table_count(table, port, REMOTE) for table in TCP_TABLES)


def server_connections(port: int) -> int:
    """Established connections whose near end is ``port`` (the server side: each connection it accepted)."""
    try:
        return sum(_netlink_count(family, port, _SPORT_OFFSET) for family in (socket.AF_INET, socket.AF_INET6))
    except OSError:
        return sum(_table_count(table, port, LOCAL) for table in TCP_TABLES)


def _netlink_count(family: int, port: int, port_offset: int) -> int:
    request = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_ESTABLISHED)
    header = _HEADER.pack(_HEADER.size + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST_DUMP, 1, 0)
    count = 0
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_SOCK_DIAG) as diag:
        diag.sendall(header + request)
        while True:
            data = diag.recv(65536)
            offset = 0
            while offset + _HEADER.size <= len(data):
                length, kind, _flags, _seq, _pid = _HEADER.unpack_from(data, offset)
                if kind == _NLMSG_DONE:
                    return count
                if kind == _NLMSG_ERROR or length < _HEADER.size:
                    raise OSError("sock_diag refused the request")
                body = offset + _HEADER.size
                if struct.unpack_from("!H", data, body + port_offset)[0] == port:
                    count += 1
                offset += (length + 3) & ~3
            if not data:
                return count


def _table_count(table: Path, port: int, column: int) -> int:
    try:
        lines = table.read_text().splitlines()[1:]
    except OSError:
        return 0
    return count_to_port(lines, port, column)


def count_to_port(lines: list[str], port: int, column: int = REMOTE) -> int:
    """In ``/proc/net/tcp`` rows (pure): those ESTABLISHED whose remote (or local) address has ``port``."""
    wanted = f":{port:04X}"
    count = 0
    for line in lines:
        fields = line.split()
        if len(fields) > 3 and fields[3] == ESTABLISHED and fields[column].endswith(wanted):
            count += 1
    return count
