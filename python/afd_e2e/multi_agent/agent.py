"""This agent, as the other agents of a case know it: the address its processes listen on (its name and job are
Buildkite's: ``buildkite/env.py``)."""

from __future__ import annotations

import socket
from collections.abc import Mapping

import psutil

from afd_e2e.errors import UsageError
from afd_e2e.plan.addresses import LISTEN_HOST


def listen_address(interface: str | None, env: Mapping[str, str]) -> str:
    """Where this agent's processes listen: ``$AFD_E2E_LISTEN_HOST`` when set, else the IPv4 address of the
    interface the profile names (``engine.interface``, ``placement.<role>.interface``)."""
    if env.get(LISTEN_HOST):
        return env[LISTEN_HOST]
    addresses = psutil.net_if_addrs().get(interface or "", [])
    found = next((a.address for a in addresses if a.family == socket.AF_INET), None)
    if found is None:
        raise UsageError(
            f"no IPv4 address on interface {interface!r} of this agent to listen on",
            f"name an interface this agent has in the profile, or set {LISTEN_HOST}",
        )
    return found
