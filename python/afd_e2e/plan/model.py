"""Typed plan records. Frozen, JSON-serialisable, and shared by the runner, preflight and the pipeline generator."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any


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

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.api_port, *self.connector_ports)


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

    @property
    def ports(self) -> tuple[int, ...]:
        return tuple(port for process in self.processes for port in process.ports)

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
