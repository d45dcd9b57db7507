"""Typed plan records. Frozen, JSON-serialisable, and shared by the runner, preflight and the pipeline generator."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class ProcessPlacement:
    """A process on another agent than the leader's: the follower job that hosts it, and how it is reached.

    Each placed process is one follower job on one agent of its pool (a role spanning N agents is N processes,
    ``node`` 0..N-1). Where it listens is ``listen_host`` (a literal, or ``${AFD_E2E_LISTEN_HOST}``: its
    interface's address on the agent); the others find it at ``${AFD_E2E_HOST_<NAME>}`` (plan/addresses.py).
    """

    agent_tags: dict[str, str]  # the follower step's ``agents``
    interface: str  # NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME there
    listen_host: str
    node: int = 0
    nodes: int = 1

    @property
    def pool(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.agent_tags.items()))


@dataclass(frozen=True)
class ProcessPlan:
    """One ``vllm serve`` process: its role, argv, environment delta, devices and ports."""

    name: str  # "server" (native) or "ffn" / "attention" (AFD); also the log file's stem
    role: str  # "native", "ffn" or "attention"
    argv: tuple[str, ...]
    env_set: dict[str, str]
    env_unset: tuple[str, ...]
    devices: tuple[int, ...]
    api_port: int
    connector_ports: tuple[int, ...]  # AFD rendezvous port and its per-subgroup ports; empty for native
    serves_api: bool  # the process whose API the workloads talk to
    # Variables naming a folder inside the run's results folder, given relative to it (the profiler's trace
    # folder); the runner makes them absolute, so the plan stays the same wherever a run writes.
    out_dir_env: dict[str, str] = field(default_factory=dict)
    placement: ProcessPlacement | None = None  # None: on the leader's agent

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.api_port, *self.connector_ports)

    @property
    def agent(self) -> str:
        """Which agent pool runs it, in words: ``leader`` or the follower's tags."""
        return "leader" if self.placement is None else f"follower on {self.placement.pool}"


@dataclass(frozen=True)
class CasePlan:
    id: str
    kind: str
    label: str
    description: str
    phases: tuple[str, ...]
    processes: tuple[ProcessPlan, ...]  # launch order
    base_url: str
    ready_url: str
    served_model_name: str
    startup_timeout_s: float
    teardown_grace_s: float
    control: bool = False  # a forced-routing control: performance only, never in the headline verdict
    # Address placeholders the case's argv and URLs name -> their meta-data keys below the leader's prefix
    # (plan/addresses.py); empty when every process runs on the leader's agent.
    rendezvous: dict[str, str] = field(default_factory=dict)

    @property
    def ports(self) -> tuple[int, ...]:
        return tuple(port for process in self.processes for port in process.ports)

    @property
    def leader_processes(self) -> tuple[ProcessPlan, ...]:
        return tuple(p for p in self.processes if p.placement is None)

    @property
    def remote_processes(self) -> tuple[ProcessPlan, ...]:
        """One follower job each."""
        return tuple(p for p in self.processes if p.placement is not None)

    @property
    def devices(self) -> tuple[int, ...]:
        return tuple(d for process in self.processes for d in process.devices)


@dataclass(frozen=True)
class ComparisonPlan:
    id: str
    baseline: str
    candidate: str
    measures: tuple[str, ...]
    control: bool = False  # a forced-routing control comparison, never in the headline verdict


@dataclass(frozen=True)
class RunPlan:
    profile: str
    platform: str
    smoke_only: bool
    model_path: str
    devices: tuple[int, ...]
    cases: tuple[CasePlan, ...]
    comparisons: tuple[ComparisonPlan, ...]

    @property
    def model_loads(self) -> int:
        """Each case is one launch: correctness and performance share it when a case runs both."""
        return len(self.cases)

    def without_controls(self) -> RunPlan:
        """The plan as if drawn without ``--forced-routing-control`` (controls take the last port blocks)."""
        return replace(
            self,
            cases=tuple(c for c in self.cases if not c.control),
            comparisons=tuple(c for c in self.comparisons if not c.control),
        )

    def case(self, case_id: str) -> CasePlan:
        return next(c for c in self.cases if c.id == case_id)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["model_loads"] = self.model_loads
        return data
