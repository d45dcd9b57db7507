"""What a profile says: typed, frozen records of a model, its hardware, cases and workloads.

Everything else (gates, plans, preflight, pipeline steps, reports) is derived from these records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from afd_e2e.errors import UsageError

SCHEMA_VERSION = 1
PHASES = ("smoke", "correctness", "performance")
INTERCONNECTS = ("nvlink", "pcie")
PLATFORMS = ("cuda", "cpu")
PARITY_MODES = ("logprobs", "exact")  # closeness as vLLM's check_logprobs_close, or identical token ids
MAX_TOP_LOGPROBS = 20  # vLLM's default --max-logprobs
ON_WORSE = ("fail", "warn", "note")  # what a metric judged worse does to its comparison


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
class CaseSpec:
    id: str
    kind: str  # "native" | "afd"
    description: str
    phases: tuple[str, ...]
    native: RoleSpec | None
    attention: RoleSpec | None
    ffn: RoleSpec | None
    connector: str | None
    extra_args: tuple[str, ...]
    env_set: Mapping[str, str]

    @property
    def label(self) -> str:
        """Human label, e.g. ``native DP4/TP1/EP4`` or ``AFD 4A4F``."""
        if self.kind == "afd":
            assert self.attention and self.ffn
            return f"AFD {self.attention.ranks}A{self.ffn.ranks}F"
        assert self.native
        ep = f"/EP{self.native.ranks}" if self.native.ep else ""
        return f"native DP{self.native.dp}/TP{self.native.tp}{ep}"

    def roles(self) -> dict[str, RoleSpec]:
        if self.kind == "afd":
            assert self.attention and self.ffn
            return {"ffn": self.ffn, "attention": self.attention}
        assert self.native
        return {"server": self.native}


@dataclass(frozen=True)
class SmokeSpec:
    prompt: str
    max_tokens: int


@dataclass(frozen=True)
class Gsm8kSpec:
    questions: int
    shots: int
    max_tokens: int
    concurrency: int
    min_correct: int
    dataset_env: str
    accuracy_meaningful: bool


@dataclass(frozen=True)
class ParitySpec:
    """Greedy outputs of the same prompts on two cases. ``mode`` logprobs: a prompt passes when its tokens are
    identical, or when at the first differing position each side's token is within the other's ``top_logprobs``;
    exact: only identical token ids pass. Every prompt must pass."""

    prompts: tuple[str, ...]
    max_tokens: int
    mode: str
    top_logprobs: int


@dataclass(frozen=True)
class BenchMetric:
    key: str  # a ``vllm bench serve`` result key
    name: str
    unit: str
    higher_is_better: bool


BENCH_METRICS = (
    BenchMetric("request_throughput", "Request throughput", "req/s", True),
    BenchMetric("output_throughput", "Output throughput", "tok/s", True),
    BenchMetric("mean_ttft_ms", "TTFT", "ms", False),
    BenchMetric("mean_tpot_ms", "TPOT", "ms", False),
    BenchMetric("mean_itl_ms", "ITL", "ms", False),
    BenchMetric("mean_e2el_ms", "E2E latency", "ms", False),
    BenchMetric("p99_ttft_ms", "TTFT p99", "ms", False),
    BenchMetric("p99_tpot_ms", "TPOT p99", "ms", False),
    BenchMetric("p99_itl_ms", "ITL p99", "ms", False),
    BenchMetric("p99_e2el_ms", "E2E latency p99", "ms", False),
)


@dataclass(frozen=True)
class MetricGate:
    """A metric a performance comparison judges, and what a ``worse`` verdict on it does: ``fail`` fails the
    comparison, ``warn`` passes it with a warning, ``note`` only shows it."""

    metric: BenchMetric
    on_worse: str


@dataclass(frozen=True)
class BenchSpec:
    dataset: str
    input_len: int
    output_len: int
    num_prompts: int
    request_rate: float
    max_concurrency: int
    temperature: float
    seed: int
    warmups: int
    repetitions: int
    parity_threshold_pct: float
    timeout_s: float  # budgets.bench_repetition_s, carried here for the bench driver
    metrics: tuple[MetricGate, ...]


@dataclass(frozen=True)
class BudgetSpec:
    """Seconds each step of a case may take; a step past its budget fails its case, naming the budget."""

    startup_s: float  # launch to the API answering
    smoke_s: float
    correctness_s: float
    bench_repetition_s: float  # each warmup and formal repetition of ``vllm bench serve``
    teardown_s: float  # SIGTERM to the whole tree gone, then SIGKILL
    request_s: float  # one smoke, GSM8K or parity request

    def performance_s(self, bench: BenchSpec | None) -> float:
        """The performance phase: every repetition's budget, plus one request for the model card."""
        repetitions = (bench.warmups + bench.repetitions) if bench else 0
        return repetitions * self.bench_repetition_s + self.request_s

    def case_s(self, phases: tuple[str, ...], bench: BenchSpec | None) -> float:
        """A whole case: start-up, its phases and teardown."""
        per_phase = {"smoke": self.smoke_s, "correctness": self.correctness_s, "performance": self.performance_s(bench)}
        return self.startup_s + sum(per_phase[p] for p in phases) + self.teardown_s


@dataclass(frozen=True)
class ComparisonSpec:
    id: str
    baseline: str
    candidate: str
    measures: tuple[str, ...]  # subset of ("parity", "performance")


ON_REGRESSION = ("warn", "fail")


@dataclass(frozen=True)
class TrendSpec:
    """How a run is compared with its own history (``afd-e2e trend``)."""

    window: int = 14  # earlier runs compared
    threshold_pct: float = 5.0  # how far outside the history's spread counts as a move
    on_regression: str = "warn"  # "warn": annotation warning; "fail": failing JUnit testcase, exit 1


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
    smoke: SmokeSpec
    gsm8k: Gsm8kSpec | None
    parity: ParitySpec | None
    bench: BenchSpec | None
    comparisons: tuple[ComparisonSpec, ...]
    budgets: BudgetSpec
    trend: TrendSpec = TrendSpec()

    def case(self, case_id: str) -> CaseSpec:
        for case in self.cases:
            if case.id == case_id:
                return case
        known = ", ".join(c.id for c in self.cases)
        raise UsageError(f"profile {self.name} has no case {case_id!r}", f"use one of: {known}")
