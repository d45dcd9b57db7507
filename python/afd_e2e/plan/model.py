"""Typed plan records. Frozen, JSON-serialisable, and shared by the runner, preflight and the pipeline generator."""

from __future__ import annotations

import math
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


REPETITIONS, BLOCKS, NOT_RUN = "repetitions", "blocks", "not run"  # how a series alternates (plan/series.py)


def first_look(low: int, step: int, alternation: str) -> int:
    """Repetitions a side at a series' first look: ``min``, or after the second block (one launch a side cannot
    tell a launch's own level from the change)."""
    return low + (step if alternation == BLOCKS else 0)


def planned_looks(low: int, high: int, step: int, alternation: str) -> int:
    """The looks a series plans, each spending an equal share of both error rates: the first, then one after each
    added repetition (or block) up to ``high``."""
    return 1 + math.ceil(max(0, high - first_look(low, step, alternation)) / step)


@dataclass(frozen=True)
class SeriesPlan:
    """One ranged comparison's series: how it alternates (or why it does not), and what it may add at most."""

    comparison: str
    baseline: str
    candidate: str
    alternation: str  # repetitions | blocks | not run
    reason: str  # why this alternation (or why none), in words
    min: int
    max: int
    step: int = 1  # repetitions a side between looks: 1, or a block's
    lead: str = ""  # the side planned first, which adds first (a blocks pair may be planned candidate first)
    launches: int = 0  # added launches at most (blocks: one per added block)
    worst_s: float = 0.0  # added time at most, from the budgets (the performance budget stops it sooner)
    budget_s: float = 0.0  # the performance budget the series runs under

    @property
    def looks(self) -> int:
        return planned_looks(self.min, self.max, self.step, self.alternation)

    @property
    def added_blocks(self) -> int:
        """Blocks (or single repetitions) each side may add after its first ``min``."""
        return math.ceil((self.max - self.min) / self.step)

    def describe(self) -> str:
        """One line for the plan and the report."""
        head = f"{self.baseline} vs {self.candidate}, {self.min} to {self.max} repetitions a side"
        if self.alternation == NOT_RUN:
            return f"{head}: not run as a series ({self.reason}): {self.min} repetitions a side"
        if self.alternation == REPETITIONS:
            how = "one added repetition each, both servers up"
        else:
            how = f"blocks of {self.step} on a fresh launch each, up to {self.launches} added launches"
        cut = f", cut short by the performance budget ({self.budget_s:g} s)" if self.worst_s > self.budget_s else ""
        return (
            f"{head}, alternating {self.alternation} ({how}; {self.reason}); {self.looks} planned looks; "
            f"at most {self.worst_s:.0f} s added at the budgets{cut}"
        )


@dataclass(frozen=True)
class RunPlan:
    profile: str
    platform: str
    smoke_only: bool
    model_path: str
    devices: tuple[int, ...]
    cases: tuple[CasePlan, ...]
    comparisons: tuple[ComparisonPlan, ...]
    series: tuple[SeriesPlan, ...] = ()  # the ranged comparisons' series (plan/series.py)
    vllm_version: str | None = None  # the vLLM its argv is for (plan/vllm_versions.py); None: not known

    @property
    def model_loads(self) -> int:
        """Each case is one launch (correctness and performance share it when a case runs both); a blocks series
        adds its launches only as far as it needs them, ``series`` says how many at most."""
        return len(self.cases)

    def series_of(self, candidate: str) -> SeriesPlan | None:
        """The series a candidate runs (one at most), or None."""
        return next((s for s in self.series if s.candidate == candidate and s.alternation != NOT_RUN), None)

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
