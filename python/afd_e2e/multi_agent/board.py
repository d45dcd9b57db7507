"""What the leader and the followers of a case say to each other, through this build's meta-data.

Every key sits below the leader job's prefix (``plan/addresses.meta_data_key``), so a retried leader or another
profile's leader in the same build never reads a stale value. Per case and process:

- ``<case>/<process>/host``: where the others reach the process (its agent's rendezvous address);
- ``<case>/<process>/identity``: what its agent runs (``identity.AgentIdentity``), published with the host when a
  follower joins: the leader compares them all before anything is launched;
- ``<case>/<process>/ready``: its ``Readiness`` (agent, host, ports, pids, identity) once launched, on the leader's
  agent too: processes launch in plan order across agents (the connector's launch order, node 0 first), each agent waiting
  for the readiness of every process before its own;
- ``<case>/<process>/state``: the follower's ``RoleState`` (running, died, stalled, ended:<status>);
- ``<case>/<process>/records``: the artifact glob of the follower's records, logs and stacks, once uploaded;
- ``<case>/<process>/heartbeat``: the follower's beat while it runs (``lifecycle.Heartbeat``);
- ``<case>/phase``: what the leader runs now (the follower's watchdog judges stalls there), then ``ended:<status>``
  once the leader's case is over (the follower tears down): one key, so a follower reads one value a second.

The leader's own state (waiting, running, ended) is ``multi_agent/lifecycle.py``'s.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from afd_e2e.buildkite import meta_data
from afd_e2e.errors import UsageError
from afd_e2e.multi_agent.identity import AgentIdentity
from afd_e2e.plan.addresses import meta_data_key, rendezvous_key
from afd_e2e.runner.side import SideFailed

RUNNING, DIED, STALLED, ENDED = "running", "died", "stalled", "ended"
POLL_S = 0.5


@dataclass(frozen=True)
class Readiness:
    """A follower's processes launched: where they are, what they run, on which agent."""

    agent: str
    job: str
    host: str
    ports: tuple[int, ...]
    pids: tuple[int, ...]
    identity: AgentIdentity

    def to_meta_data(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_meta_data(cls, text: str, key: str) -> Readiness:
        try:
            data = json.loads(text)
            identity = AgentIdentity.from_meta_data(json.dumps(data.pop("identity")), key)
            return cls(
                agent=str(data["agent"]),
                job=str(data["job"]),
                host=str(data["host"]),
                ports=tuple(int(p) for p in data["ports"]),
                pids=tuple(int(p) for p in data["pids"]),
                identity=identity,
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise UsageError(
                f"meta-data {key}: not a follower's readiness ({exc})", "every agent of the case must run this afd-e2e"
            ) from exc


@dataclass(frozen=True)
class RoleState:
    """A follower's processes as their own agent sees them: ``kind`` running, died, stalled or ended; ``detail``
    the reason (a death's root cause, the stall's message) or the ended status."""

    kind: str
    detail: str = ""

    def to_meta_data(self) -> str:
        return f"{self.kind}:{self.detail}" if self.detail else self.kind

    @classmethod
    def from_meta_data(cls, text: str) -> RoleState:
        kind, _, detail = text.partition(":")
        return cls(kind, detail)

    @property
    def failed(self) -> bool:
        return self.kind in (DIED, STALLED)


class Board:
    """One leader's keys in build meta-data (``buildkite-agent meta-data``), for the leader or one of its followers."""

    def __init__(self, leader_job: str, case_id: str) -> None:
        self.leader_job, self.case_id = leader_job, case_id

    def key(self, *parts: str) -> str:
        return meta_data_key(self.leader_job, "/".join((self.case_id, *parts)))

    def host_key(self, process: str) -> str:
        return meta_data_key(self.leader_job, rendezvous_key(self.case_id, process))

    def get(self, key: str) -> str | None:
        return meta_data.get(key)

    def set(self, key: str, value: str) -> None:
        meta_data.set_value(key, value)

    # -- a process's address, readiness, state and records
    def publish_host(self, process: str, host: str) -> None:
        self.set(self.host_key(process), host)

    def host(self, process: str) -> str | None:
        return self.get(self.host_key(process))

    def publish_identity(self, process: str, identity: AgentIdentity) -> None:
        self.set(self.key(process, "identity"), identity.to_meta_data())

    def publish_ready(self, process: str, ready: Readiness) -> None:
        self.set(self.key(process, "ready"), ready.to_meta_data())

    def ready(self, process: str) -> Readiness | None:
        text = self.get(key := self.key(process, "ready"))
        return None if text is None else Readiness.from_meta_data(text, key)

    def publish_state(self, process: str, state: RoleState) -> None:
        self.set(self.key(process, "state"), state.to_meta_data())

    def state(self, process: str) -> RoleState | None:
        text = self.get(self.key(process, "state"))
        return None if text is None else RoleState.from_meta_data(text)

    def heartbeat_key(self, process: str) -> str:
        return self.key(process, "heartbeat")

    def publish_records(self, process: str, glob: str) -> None:
        self.set(self.key(process, "records"), glob)

    def records(self, process: str) -> str | None:
        return self.get(self.key(process, "records"))

    # -- the leader's case
    def publish_phase(self, phase: str) -> None:
        self.set(self.key("phase"), phase)

    def phase(self) -> str | None:
        return self.get(self.key("phase"))

    def publish_end(self, status: str) -> None:
        self.set(self.key("phase"), f"{ENDED}:{status}")


def case_ended(phase: str | None) -> str | None:
    """The status the leader's case ended with, from its ``phase`` value; None while it runs."""
    if phase is None or not phase.startswith(f"{ENDED}:"):
        return None
    return phase.partition(":")[2]


def wait_for(
    read: Callable[[], str | None],
    budget_s: float,
    checks: tuple[Callable[[], None], ...] = (),
    sleep: Callable[[float], object] = time.sleep,
) -> str | None:
    """Poll ``read`` every POLL_S until it gives a value (returned) or ``budget_s`` runs out (None); each of
    ``checks`` runs between polls and may raise (a cancel)."""
    deadline = time.monotonic() + budget_s
    while True:
        for check in checks:
            check()
        value = read()
        if value is not None:
            return value
        if time.monotonic() >= deadline:
            return None
        sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))


class RendezvousFailed(SideFailed):
    """The agents of a case did not meet: a follower that never joined within ``budgets.rendezvous_s``, or one
    that runs other software. The message names the agent and the role."""
