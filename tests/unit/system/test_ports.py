"""Port probing: a listening socket is reported busy with its holder; a free port is not. Letting go of this
process's own connections to a port wakes a thread blocked on one, and the peer sees it closed."""

from __future__ import annotations

import os
import socket
import threading

from afd_e2e.system.ports import busy_ports, shut_own_connections
from unit.timing import GUARD_S


def test_listening_port_is_busy_and_names_this_process():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        busy = busy_ports([port])
        assert busy == {port: f"pid {os.getpid()} ({busy[port].split('(')[1].rstrip(')')})"}
    assert busy_ports([port]) == {}


def test_shutting_own_connections_wakes_a_blocked_reader_and_closes_the_peer():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        peer, _ = server.accept()
        woke: list[bytes] = []
        reader = threading.Thread(target=lambda: woke.append(client.recv(1)))  # an abandoned request's thread
        reader.start()
        reader.join(0.2)
        assert reader.is_alive()  # blocked: nothing answers

        assert shut_own_connections(port) == 1
        reader.join(GUARD_S)  # only a guard: a woken thread may wait its turn on a loaded machine
        assert not reader.is_alive() and woke == [b""]  # woken, as at the end of the stream
        peer.settimeout(GUARD_S)
        assert peer.recv(1) == b""  # the server sees the connection closed: nothing for it to wait on
        assert shut_own_connections(port) == 0  # shut already: no longer established
        client.close()
        peer.close()
