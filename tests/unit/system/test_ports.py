"""Port probing: a listening socket is reported busy with its holder; a free port is not."""

from __future__ import annotations

import os
import socket

from afd_e2e.system.ports import busy_ports


def test_listening_port_is_busy_and_names_this_process():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        busy = busy_ports([port])
        assert busy == {port: f"pid {os.getpid()} ({busy[port].split('(')[1].rstrip(')')})"}
    assert busy_ports([port]) == {}
