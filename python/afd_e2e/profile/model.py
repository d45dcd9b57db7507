"""What a profile says: typed, frozen records of a model, its hardware, cases and workloads.

Everything else (gates, plans, preflight, pipeline steps, reports) is derived from these records.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from afd_e2e.errors import UsageError
from afd_e2e.profile import catalogue
from afd_e2e.profile.connectors import CURRENT_RULES, ConnectorTraits

SCHEMA_VERSION = 1
ROLE_NAMES = ("server", "attention", "ffn")
INTERCONNECTS = ("nvlink", "pcie")
PLATFORMS = ("cuda", "cpu")
ON_WORSE = ("fail", "warn", "note")  # what a metric judged worse does to its comparison
# vLLM's model runner: v1, v2 (ModelRunnerV2), or auto (vLLM's own choice, which on 0.26 is V2 for some
# architectures and V1 for others). One value for every child of a profile, native included, so both sides of a
# comparison run the same runner unless a case declares its own.
MODEL_RUNNERS = ("v1", "v2", "auto")
MODEL_RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"
CASE_ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")  # lower-kebab-case, as the AFD plugin's e2e cases are named


@dataclass(frozen=True)
class CheckpointSpec:
    """What the checkpoint's config.json must declare (top level or under ``text_config``)."""

    architectures: tuple[str, ...]
    model_type: str
    num_experts: int | None
    num_experts_per_tok: int | None
    min_size_gib: float


@dataclass(frozen=True)
class ModelSpec:
    served_name: str
    checkpoint: CheckpointSpec


@dataclass(frozen=True)
class HardwareSpec:
    gpus: int
    min_memory_mib: int
    interconnects: tuple[str, ...]
    require_nvlink_between_roles: bool
    min_driver: str | None
    min_cuda: str | None
    gpu_models: tuple[str, ...]


@dataclass(frozen=True)
class SoftwareSpec:
    vllm_version: str | None
    afd_plugin: bool
    # Whose rules the profile reader applies where the plugin changed them (``profile/connectors.py``):
    # "current", or "before-pr-309" for a plugin whose P2P connector still needs A a multiple of F.
    afd_plugin_rules: str = CURRENT_RULES


@dataclass(frozen=True)
class GateSpec:
    """Environment variables that must opt in before this profile may run."""

    backend: str
    large_model: bool
    model_env: str
    devices_env: str | None


@dataclass(frozen=True)
class EngineSpec:
    executable: str
    host: str
    port_base: int
    port_stride: int
    serve_args: tuple[str, ...]
    env_set: Mapping[str, str]
    env_strip: tuple[str, ...]
    ready_path: str
    # The leader agent pool's network interface: where its processes listen, and NCCL_SOCKET_IFNAME /
    # GLOO_SOCKET_IFNAME, in a case with a role placed on another agent (``CaseSpec.placement``).
    interface: str | None = None
    # A start-up where every role is alive but none logs a line or uses CPU for budgets.stall_s (a connector
    # rendezvous that never completes): "fail" ends the case with the diagnosis, "wait" reports it and waits on
    # until budgets.startup_s.
    on_startup_stall: str = "wait"
    model_runner: str = "v1"  # MODEL_RUNNERS: the runner every child starts with unless its case says otherwise


@dataclass(frozen=True)
class RoleSpec:
    """One vLLM serve process's topology: a device group, DP and TP sizes, expert parallel."""

    devices: str | None
    dp: int
    tp: int
    ep: bool

    @property
    def ranks(self) -> int:
        return self.dp * self.tp


@dataclass(frozen=True)
class PlacementSpec:
    """Where one role of a case runs when not on the leader's agent: an agent pool found by its Buildkite tags.

    ``nodes`` > 1: the role's DP ranks span that many agents of the pool (vLLM's multi-node data parallel:
    ``--data-parallel-size-local``, ``--data-parallel-start-rank``, ``--headless`` on all but the first).
    """

    agents: Mapping[str, str]  # the pool's agent tags (``queue``, ``gpus``, ...)
    interface: str  # that pool's network interface: NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME, and where it listens
    listen: str | None = None  # a literal listen address; None: the interface's own address, found on the agent
    devices: tuple[int, ...] = ()  # device ids on each agent of the pool (cuda); none on the CPU
    nodes: int = 1

    @property
    def tags_text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.agents.items()))


@dataclass(frozen=True)
class ArgEdit:
    """What a case changes in one role's (or every role's, ``role`` None) serve arguments and environment.

    ``remove_args`` names flags (``--enforce-eager``, ``--max-model-len``): the flag goes with its value, whether
    written ``--flag=value`` or ``--flag value``. Removals apply before additions.
    """

    role: str | None
    add_args: tuple[str, ...] = ()
    remove_args: tuple[str, ...] = ()
    env_set: Mapping[str, str] = field(default_factory=dict)
    env_remove: tuple[str, ...] = ()

    def applies_to(self, role_name: str) -> bool:
        return self.role is None or self.role == role_name


@dataclass(frozen=True)
class GraphSpec:
    """CUDA-graph decoding (``FULL_DECODE_ONLY``) captured at one size, which also bounds the batch."""

    capture_size: int


@dataclass(frozen=True)
class DboSpec:
    """Dual-batch overlap: ``--enable-dbo`` with its two token thresholds."""

    decode_token_threshold: int
    prefill_token_threshold: int


@dataclass(frozen=True)
class ProfilerSpec:
    """The AFD plugin's per-role torch profiler schedule, and how much of its traces a run uploads."""

    wait: int
    warmup: int
    active: int
    repeat: int
    skip_first: int
    wait_s: float  # how long the profiler phase waits for every role's trace to appear
    upload_limit_mib: float


@dataclass(frozen=True)
class FlightRecorderSpec:
    """PyTorch's NCCL flight recorder: the last ``buffer_size`` collectives of every rank, dumped when a collective
    times out, into the case's forensics folder (``forensics/<case>/nccl/<role>-rank<N>``)."""

    buffer_size: int


@dataclass(frozen=True)
class CaseSpec:
    id: str
    kind: str  # "native" | "afd"
    description: str
    phases: tuple[str, ...]
    native: RoleSpec | None
    attention: RoleSpec | None
    ffn: RoleSpec | None
    connector: str | None
    edits: tuple[ArgEdit, ...] = ()  # the parent's edits first, then the variant's own
    graph: GraphSpec | None = None
    dbo: DboSpec | None = None
    profiler: ProfilerSpec | None = None
    nccl_flight_recorder: FlightRecorderSpec | None = None
    extends: str | None = None  # the case this one is a variant of (already folded into the fields above)
    placement: Mapping[str, PlacementSpec] = field(default_factory=dict)  # role -> another agent pool
    # This case's model runner where it differs from ``engine.model_runner`` on purpose: a comparison between cases
    # whose runners differ is then declared, not failed.
    model_runner: str | None = None
    connector_traits: ConnectorTraits | None = None  # an AFD case's connector's (``profile/connectors.py``)
    connector_extra_config: Mapping[str, Any] = field(default_factory=dict)  # passed through into the AFD config

    @property
    def multi_agent(self) -> bool:
        """Some role runs on another agent than the leader's: the case needs a rendezvous through the build."""
        return bool(self.placement)

    @property
    def label(self) -> str:
        """Human label, e.g. ``native DP4/TP1/EP4``, ``AFD 4A4F`` or ``AFD 1A1F, CUDA graph 64, DBO``."""
        if self.kind == "afd":
            assert self.attention and self.ffn
            a, f = self.attention, self.ffn
            tp = f" TP{a.tp}/TP{f.tp}" if a.tp > 1 or f.tp > 1 else ""
            base = f"AFD {a.ranks}A{f.ranks}F{tp}"
        else:
            assert self.native
            ep = f"/EP{self.native.ranks}" if self.native.ep else ""
            base = f"native DP{self.native.dp}/TP{self.native.tp}{ep}"
        return ", ".join([base, *self.features])

    @property
    def features(self) -> tuple[str, ...]:
        """The feature options this case turns on, in words."""
        out = []
        if self.graph:
            out.append(f"CUDA graph {self.graph.capture_size}")
        if self.dbo:
            out.append("DBO")
        if self.profiler:
            out.append("profiler")
        if self.nccl_flight_recorder:
            out.append("NCCL flight recorder")
        if self.model_runner:
            out.append(f"model runner {self.model_runner.upper()}")
        return tuple(out)

    def roles(self) -> dict[str, RoleSpec]:
        """The case's roles in launch order: an AFD case's as its connector's traits say."""
        if self.kind == "afd":
            assert self.attention and self.ffn and self.connector_traits
            both = {"ffn": self.ffn, "attention": self.attention}
            return {name: both[name] for name in self.connector_traits.roles_in_launch_order}
        assert self.native
        return {"server": self.native}


# The budgets BudgetSpec holds as fields; the phases' budgets are the catalogue's.
OWN_BUDGETS = ("startup_s", "teardown_s", "request_s", "rendezvous_s", "heartbeat_lost_s", "drain_s")


@dataclass(frozen=True)
class BudgetSpec:
    """Seconds each step of a case may take; a step past its budget fails its case, naming the budget. The
    phases' budgets are keyed as in the profile (``smoke_s``, ``bench_repetition_s``, ...): their keys and defaults
    come from the catalogue of phases (``afd_e2e.profile.catalogue``), and each reads as an attribute too."""

    startup_s: float  # launch to the API answering
    teardown_s: float  # SIGTERM to the whole tree gone, then SIGKILL
    request_s: float  # one request of a phase: a completion, a GSM8K question, a parity prompt
    phases: Mapping[str, float] = field(default_factory=dict)  # a phase's budget key -> seconds
    # A case whose roles run on several agents: from the leader uploading its followers to every follower ready.
    # A follower that gets no agent within it ends the leader's case; it then finds nothing to join.
    rendezvous_s: float = 600.0
    # A case whose roles run on several agents: a side that sees no new heartbeat of the other for this long takes
    # it for gone (killed outright, its agent lost). Each side beats every sixth of it: six beats missed.
    heartbeat_lost_s: float = 30.0
    # How long vLLM may drain in-flight requests on SIGTERM (``--shutdown-timeout``, whole seconds); None: half of
    # ``teardown_s``. vLLM waits that long on its EngineCore whether or not anything is in flight (0.32 on the CPU:
    # the workers exit in ~3 s, the EngineCore lingers until the API server's timeout kills it), so a stop costs the
    # whole drain. Shorter is not free: the executor waits for its workers only that long, and a worker left behind
    # must then end on its own within the rest of ``teardown_s`` (a loaded machine's embedded default once missed:
    # drain 1 s, the orphaned worker still alive 10 s after SIGTERM, a forced SIGKILL). No shipped profile sets it.
    drain_s: int | None = None

    def seconds(self, key: str) -> float:
        """A phase's budget; a phase registered after the profile was read gets its default."""
        if key in self.phases:
            return self.phases[key]
        return catalogue.budget_keys()[key]

    def __getattr__(self, name: str) -> float:
        if name.endswith("_s") and not name.startswith("_"):
            try:
                return self.seconds(name)
            except KeyError:
                pass
        raise AttributeError(name)

    def keys(self) -> tuple[str, ...]:
        """Every budget a profile may state."""
        return (*OWN_BUDGETS, *self.phases)

    def replaced(self, **seconds: float) -> BudgetSpec:
        """A copy with some budgets changed, phase budgets included (``smoke_s=1``)."""
        own = {k: v for k, v in seconds.items() if k in OWN_BUDGETS}
        phases = {**self.phases, **{k: v for k, v in seconds.items() if k not in own}}
        return replace(self, **own, phases=phases)


@dataclass(frozen=True)
class ComparisonSpec:
    """Any two cases side by side: native vs AFD, AFD eager vs AFD graph, AFD eager vs AFD with DBO."""

    id: str
    baseline: str
    candidate: str
    measures: tuple[str, ...]  # what the registered phases measure (``afd_e2e.profile.catalogue.MEASURES``)


ON_REGRESSION = ("warn", "fail")
# A profile whose description names one of these execution modes requires each case to prove its mode by default.
MODE_WORDS = ("eager", "graph", "compiled", "dbo")


@dataclass(frozen=True)
class ExecutionSpec:
    """``execution.require_proof``: an ``unproven`` execution mode fails its case instead of warning. None: the
    default, true when the profile's description names a mode (``MODE_WORDS``)."""

    require_proof: bool | None = None


@dataclass(frozen=True)
class TrendSpec:
    """How a run is compared with its own history (``afd-e2e trend``)."""

    window: int = 14  # earlier runs compared
    threshold_pct: float = 1.0  # the smallest move (% of the median) the change-point rule calls (trend/analysis.py)
    on_regression: str = "warn"  # "warn": annotation warning; "fail": failing JUnit testcase, exit 1
    # a regression episode opens only at a move this material too (trend/episodes.py): robust σ and % of the median
    materiality_sigma: float = 1.0
    materiality_pct: float = 2.0
    bisect: str = "block"  # the bisect step offered when an episode opens: "block" (asks first) | "unattended"


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    source: str
    platform: str
    smoke_only: bool
    model: ModelSpec
    hardware: HardwareSpec
    software: SoftwareSpec
    agent_tags: Mapping[str, str]
    gates: GateSpec
    device_count: int
    default_devices: tuple[int, ...]
    device_groups: Mapping[str, tuple[int, int]]
    engine: EngineSpec
    cases: tuple[CaseSpec, ...]
    comparisons: tuple[ComparisonSpec, ...]
    budgets: BudgetSpec
    trend: TrendSpec = TrendSpec()
    execution: ExecutionSpec = ExecutionSpec()
    workloads: Mapping[str, Any] = field(default_factory=dict)  # ``workloads.<key>`` of registered phases

    @property
    def require_proof(self) -> bool:
        """Whether an unproven execution mode fails its case (``ExecutionSpec``)."""
        if self.execution.require_proof is not None:
            return self.execution.require_proof
        return any(word in self.description.lower() for word in MODE_WORDS)

    @property
    def multi_agent(self) -> bool:
        """Some case places a role on another agent: the GPU step is a leader that uploads follower steps."""
        return any(case.multi_agent for case in self.cases)

    def gpus(self, case: CaseSpec) -> int:
        """The GPUs a case occupies on every agent it spans (its roles' DP x TP ranks; none on the CPU): what a
        pull request's GPU cap (``afd-e2e pipeline --pr-max-gpus``) is held against."""
        if self.platform != "cuda":
            return 0
        return sum(role.ranks for role in case.roles().values())

    def model_runner(self, case: CaseSpec) -> str:
        """The runner a case's children start with: its own where it declares one, else the engine's."""
        return case.model_runner or self.engine.model_runner

    def case(self, case_id: str) -> CaseSpec:
        for case in self.cases:
            if case.id == case_id:
                return case
        known = ", ".join(c.id for c in self.cases)
        raise UsageError(f"profile {self.name} has no case {case_id!r}", f"use one of: {known}")
