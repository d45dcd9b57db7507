"""The records of ``results.json`` (schema ``afd-e2e/results/v2``): what a run measured, typed.

Everything downstream (JUnit, annotation, plots, Buildkite upload, the nightly trend) reads these records, never raw
JSON: ``load_results`` checks a file against them and ``results/schema.json`` is generated from them. Paths inside
are relative to the results folder. Statuses are ``Status`` (one vocabulary for runs, cases, phases and checks);
a performance metric's direction is a ``Verdict``. A field with a default may be missing from a file, so new
optional fields keep older files readable. Metric keys are ``vllm bench serve`` result keys (request_throughput,
output_throughput, mean_ttft_ms, ..., p99_*). ``plan.cases[].control`` and ``plan.comparisons[].control`` mark the
forced-routing control, which never enters the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from afd_e2e.plan.model import REPETITIONS, RunPlan, planned_looks
from afd_e2e.results import result_sections
from afd_e2e.results.codec import EXTRAS
from afd_e2e.results.execution_records import ModelRunners
from afd_e2e.results.status import Saturation, Status, Verdict

SCHEMA = "afd-e2e/results/v2"
LOG_TAIL_CHARS = 64 * 1024  # a case's log_tail is at most this long; the whole logs are in logs/<case>/


# ---- where and on what the run ran --------------------------------------------------------------------------------


@dataclass
class GpuInfo:
    index: int
    name: str
    memory_total_mib: int


@dataclass
class CheckpointIdentity:
    """What the served checkpoint declares and weighs."""

    path: str
    architectures: list[str] = field(default_factory=list)
    model_type: str | None = None
    size_gib: float | None = None


@dataclass
class Environment:
    """The machine and software the run used; empty until the run probed it."""

    hostname: str | None = None
    python: str | None = None
    vllm: str | None = None
    torch: str | None = None
    driver: str | None = None
    cuda: str | None = None
    gpus: list[GpuInfo] = field(default_factory=list)
    topology: str | None = None  # one line: "0-1 NV18" per pair, or why it was not probed
    checkpoint: CheckpointIdentity | None = None


@dataclass
class BuildInfo:
    """The Buildkite build and job the run belonged to (from ``BUILDKITE_*``), the keys a trend matches runs on."""

    build_number: int | None = None
    build_id: str | None = None
    build_url: str | None = None
    job_id: str | None = None
    pipeline_slug: str | None = None
    organization_slug: str | None = None
    branch: str | None = None
    commit: str | None = None
    source: str | None = None  # schedule, ui, api, webhook, trigger_job
    pull_request: str | None = None  # the number, when the build is for a pull request
    agent_name: str | None = None
    agent_tags: dict[str, str] = field(default_factory=dict)  # BUILDKITE_AGENT_META_DATA_<TAG>, tag names lowercased


# ---- preflight ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreflightCheck:
    """One preflight verdict, from the check to results.json: ``measured`` is what this agent has, ``wanted`` what
    the profile asks, ``fix`` how to mend it."""

    name: str
    status: Status
    measured: str
    wanted: str = ""
    fix: str = ""


@dataclass
class HardwareGpu:
    index: int
    name: str
    uuid: str
    bus_id: str
    memory_total_mib: int
    memory_used_mib: int | None  # as nvidia-smi shows it; None when NVML lacks the v2 reading
    memory_used_v1_mib: int  # driver-reserved included
    compute_pids: list[int] = field(default_factory=list)


@dataclass
class HardwareLink:
    gpus: list[int]  # the pair (i, j), i < j
    kind: str  # NVLINK, PCIE or UNKNOWN
    label: str  # NV18, PIX, PXB, PHB, NODE, SYS or "?"
    nvlinks: int
    source: str  # nvml, "nvidia-smi topo -m" or none


@dataclass
class Hardware:
    """The GPU inventory preflight judged: every GPU and the link of every pair, as ``nvidia-smi topo -m`` shows it."""

    driver: str
    cuda: str | None
    gpus: list[HardwareGpu]
    links: list[HardwareLink]
    matrix: list[list[str]]  # header row, then one row per GPU


@dataclass
class PreflightRecord:
    """The real ``afd-e2e preflight`` report, taken at the start of the run."""

    status: Status  # passed when the agent fits (no check failed), failed otherwise
    profile: str
    devices: list[int]
    checks: list[PreflightCheck]
    hardware: Hardware | None = None  # None on the CPU or without NVML (the GPU checks then say why)
    software: dict[str, str | None] = field(default_factory=dict)  # what was found installed, by name
    seconds: float | None = None  # how long the checks took


# ---- a case -------------------------------------------------------------------------------------------------------


@dataclass
class Timings:
    launch_to_ready_s: float | None = None
    teardown_s: float | None = None
    wall_s: float | None = None
    phases: dict[str, float] = field(default_factory=dict)


@dataclass
class ProcessRecord:
    """One launched process: exactly what was started (secret values redacted) and how it ended."""

    name: str
    pid: int | None
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    exit_code: int | None = None
    forced_kill: bool = False
    log: str = ""  # logs/<case>/<name>.log
    agent: str = ""  # the agent it ran on (BUILDKITE_AGENT_NAME, else the host's name); '' in older results


@dataclass
class Load:
    """What a repetition asked of the server and what it got, with the saturation rule's figures (the rule is
    ``workloads.bench.load_of``'s): saturated when ``achieved_rate`` < ``floor_rate`` = 0.9 x ``expected_rate``, the
    rate an unsaturated server shows for the asked one (``num_prompts / (num_prompts / requested_rate + drain_s)``:
    vLLM sends the last request at exactly ``num_prompts / requested_rate``, then waits ``drain_s`` for it)."""

    achieved_rate: float  # req/s: vllm bench serve's request_throughput
    requested_rate: float | None = None  # req/s; None: "inf" (every request at once: no rate to fall short of)
    max_concurrency: int | None = None  # the client's cap; None: none
    peak_concurrency: int | None = None  # vllm bench serve's max_concurrent_requests (per 1-s bucket); None: absent
    drain_s: float | None = None  # the last request's drain: p99 end-to-end latency
    expected_rate: float | None = None
    floor_rate: float | None = None
    saturated: Saturation | None = None


@dataclass
class Repetition:
    """One ``vllm bench serve`` run: judged from its result JSON (``path``), output in ``log``."""

    index: int
    status: Status
    failure: str | None
    path: str  # bench/<case>/rep-N.json (warmup-N.json)
    log: str  # bench/<case>/rep-N.log
    completed: int | None = None
    failed: int | None = None
    num_prompts: int | None = None
    duration_s: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)  # the exact ``vllm bench serve`` command (secrets redacted)
    load: Load | None = None  # None: results written before saturation was named, or no readable result JSON


@dataclass
class CasePerformance:
    status: Status
    failure: str | None = None
    warmups: list[Repetition] = field(default_factory=list)
    repetitions: list[Repetition] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # the bench client's environment (secrets redacted)
    gpus: int = 0  # devices the case occupies: the per-GPU throughput view divides by it (0 on the CPU)
    # repetitions added one at a time after ``workloads.bench.repetitions.min`` until decided (a range only)
    sequential: SequentialRecord | None = None
    # each named load shape's own series (``workloads.bench.shapes``), run after this one on the same server, in
    # the profile's order; the series above is the shape of ``workloads.bench``'s own keys
    shapes: dict[str, CasePerformance] = field(default_factory=dict)


@dataclass
class PerformanceLook:
    """One look of a sequential comparison: the passed repetitions each side had then, every gated metric's verdict
    at that look's share of the error rates, and whether all of them were decided (the series stopped there)."""

    look: int
    baseline_repetitions: int
    candidate_repetitions: int
    verdicts: dict[str, Verdict]
    decided: bool


@dataclass
class SequentialRecord:
    """How a ranged series ran (``workloads.bench.repetitions: {min, max}``): the pair, the range, how it
    alternated, every look, why it stopped, every formal repetition of the pair in the order run, and which
    repetitions of each side (1-based indices into its ``performance.repetitions``) the comparison judges: the last
    look's. A baseline shared by two comparisons runs added repetitions for each; each comparison judges only its
    own. A ``blocks`` series also records every block (a fresh launch of one side, its teardown and hygiene) and
    each side's block effect: its blocks against each other."""

    baseline: str
    candidate: str
    min: int
    max: int
    looks: list[PerformanceLook] = field(default_factory=list)
    stopped: str = ""  # decided | max | budget | failed | cancelled | not run
    order: list[str] = field(default_factory=list)  # "cpu-tp1 rep 1", ...
    reason: str = ""  # why it stopped or never ran, in words
    baseline_repetitions: list[int] = field(default_factory=list)
    candidate_repetitions: list[int] = field(default_factory=list)
    alternation: str = REPETITIONS  # repetitions | blocks (plan/series.py)
    step: int = 1  # repetitions a side between looks: 1, or a block's
    blocks: list[BlockRecord] = field(default_factory=list)
    block_effects: list[BlockEffect] = field(default_factory=list)

    @property
    def planned_looks(self) -> int:
        """The looks both error rates are split over (``plan.model.planned_looks``)."""
        return planned_looks(self.min, self.max, self.step, self.alternation)

    @property
    def launches(self) -> int:
        """Fresh launches a blocks series added (a side's first block is its case's own launch)."""
        return sum(1 for block in self.blocks if block.block > 1)


@dataclass
class BlockRecord:
    """One block of a ``blocks`` series: a side's launch and the repetitions it ran. Block 1 of each side is its
    case's own launch (its record is the case's); each later one is a fresh launch, stopped and checked for
    hygiene like a case, its processes and checks kept here."""

    side: str  # the case id
    block: int  # 1-based, per side
    repetitions: list[int] = field(default_factory=list)  # 1-based indices into the side's performance.repetitions
    status: Status = Status.PASSED
    failure: str | None = None
    launch_to_ready_s: float | None = None
    teardown_s: float | None = None
    processes: list[ProcessRecord] = field(default_factory=list)
    hygiene: list[CheckRecord] = field(default_factory=list)
    log_tail: str | None = None


@dataclass
class BlockEffect:
    """A side's blocks against each other on one metric: how far its last block's mean lies from its first, and
    whether the blocks differ beyond the repetitions' own noise (a one-way analysis of variance: ``p_value``)."""

    side: str
    metric: str
    block_means: list[float]
    drift_pct: float  # last block's mean against the first's
    p_value: float | None  # None: too few repetitions to tell (a block of one)
    beyond_noise: bool


@dataclass
class CheckRecord:
    """One named check with its detail: hygiene after a case, cleanup after a run, one of a phase's checks."""

    check: str  # processes, ports, gpu_memory, forced_kill, leftover_files, runner, completion, usage, ...
    status: Status
    detail: str
    agent: str = ""  # where it was checked, when not on the leader's agent (a follower's hygiene, merged)


@dataclass
class ProcessDump:
    """One process of a case when forensics were taken: its OS state and, when py-spy could read it, its stacks in
    ``path``. ``busy_frames``: the innermost frames of its busy thread (the active one, else the main thread),
    innermost first; ``failure``: why it could not be dumped (ptrace not permitted, gone, a zombie, ...)."""

    pid: int
    role: str  # the plan name of the server it belongs to: server, attention, ffn
    name: str  # its process title: the API server, EngineCore_DP0, VLLM::Worker_TP0, ...
    status: str  # psutil's: running, sleeping, disk-sleep, stopped, zombie, ...
    cpu_s: float
    threads: int
    path: str | None = None  # forensics/<case>/<role>-<pid>.txt: state, threads, CPU time and the stacks
    mode: str | None = None  # how py-spy read it: native, python, nonblocking (a stopped process)
    failure: str | None = None
    busy_thread: str | None = None  # "Thread 123 (active): MainThread"
    busy_frames: list[str] = field(default_factory=list)
    seconds: float | None = None  # how long its dump took


@dataclass
class CaseForensics:
    """Every live process of a case dumped at one moment: on a death, a stall, a budget timeout or at start-up."""

    trigger: str  # death | stall | timeout | startup
    reason: str  # the case's failure line that caused it
    taken_at: str  # ISO 8601 UTC
    seconds: float  # the whole capture, every dump concurrently
    processes: list[ProcessDump] = field(default_factory=list)
    nccl_traces: list[str] = field(default_factory=list)  # forensics/<case>/nccl/...: PyTorch's flight recorder


@dataclass
class StallRecord:
    """What the progress watchdog found (``telemetry/watchdog.py``): ``kind`` stall (requests in flight, no token
    moving) or startup (no role logging or using CPU); ``culprit`` the process whose state explains it."""

    kind: str  # stall | startup
    phase: str
    in_flight: int  # client connections open to the API port when it was found
    quiet_s: float
    culprit: str  # "ffn EngineCore_DP0 pid 12 is stopped"
    at_s: float  # seconds after the case's launch
    message: str
    kept: bool = False  # --keep-on-stall left the case's processes up


@dataclass
class RoleTelemetry:
    """One role of a case over its performance phase: its GPUs' mean utilisation, its engine's peak KV-cache usage
    and preemptions (None where not measured: no GPU, no /metrics, no performance phase)."""

    role: str  # the plan name: server, attention, ffn
    devices: list[int] = field(default_factory=list)
    mean_gpu_util_pct: float | None = None
    peak_kv_cache_usage: float | None = None  # 0..1, over the whole case
    preemptions: float | None = None  # over the whole case


@dataclass
class TelemetrySummary:
    """A case's telemetry timeline: the samples in ``path`` (``telemetry/<case>.jsonl.gz``, one JSON line each,
    about 1 Hz), what they sum up to per role, the sampler's own CPU cost and what the watchdog found."""

    path: str | None
    samples: int
    interval_s: float
    stall_s: float  # budgets.stall_s
    sampler_cpu_s: float
    roles: list[RoleTelemetry] = field(default_factory=list)
    stalls: list[StallRecord] = field(default_factory=list)


def _registered_case_sections() -> Mapping[str, Any]:
    return result_sections.extra_case_sections()


def _registered_comparison_sections() -> Mapping[str, Any]:
    return result_sections.extra_comparison_sections()


class _Sections:
    """A record's sections by name: a field of the record, or one a registered phase added (kept in ``extra``)."""

    extra: dict[str, Any]

    def section(self, name: str) -> Any:
        return getattr(self, name) if name in self.__dataclass_fields__ else self.extra.get(name)  # type: ignore[attr-defined]

    def set_section(self, name: str, value: Any) -> None:
        if name in self.__dataclass_fields__:  # type: ignore[attr-defined]
            setattr(self, name, value)
        elif value is None:
            self.extra.pop(name, None)
        else:
            self.extra[name] = value


@dataclass
class CaseResults(_Sections):
    id: str
    label: str
    kind: str
    status: Status = Status.RUNNING
    failure: str | None = None
    timings: Timings = field(default_factory=Timings)
    processes: list[ProcessRecord] = field(default_factory=list)
    log_tail: str | None = None  # the end of the failing process's log, at most LOG_TAIL_CHARS (whole: logs/<case>/)
    performance: CasePerformance | None = None
    hygiene: list[CheckRecord] = field(default_factory=list)
    forensics: list[CaseForensics] = field(default_factory=list)  # stacks of every process, on a failure
    # sections of phases registered beyond the fields above, each under its own key in results.json
    extra: dict[str, Any] = field(default_factory=dict, metadata={EXTRAS: _registered_case_sections})


# ---- comparisons --------------------------------------------------------------------------------------------------


@dataclass
class SideStats:
    """One side of a metric: mean ± sample std of its values, and their noise (``stats.noise``): coefficient of
    variation, the first measured repetition against the rest (warm-up effect), MAD outliers (1-based)."""

    mean: float
    std: float
    values: list[float]
    cv_pct: float | None = None
    warmup_pct: float | None = None
    outliers: list[int] = field(default_factory=list)


@dataclass
class MetricComparison:
    key: str
    name: str
    unit: str
    higher_is_better: bool
    baseline: SideStats
    candidate: SideStats
    delta_pct: float | None  # None when the baseline mean is 0
    ci95_pct: list[float] | None  # Welch's 95% interval of the delta, in % of the baseline mean (split over looks)
    verdict: Verdict
    on_worse: str = "warn"  # the profile's gate for a worse verdict: fail | warn | note
    # Absent in results written before equivalence testing: their ``parity`` meant "the 95% interval includes zero
    # or the delta is within the threshold" (``judged_by_equivalence`` False), and is shown so.
    margin_pct: float | None = None  # parity when ci90_pct lies inside ±margin
    ci90_pct: list[float] | None = None  # the equivalence (TOST) interval, split over looks
    require: str = ""  # "parity": inconclusive fails it too
    needed_repetitions: int | None = None  # inconclusive: repetitions per side that would decide it
    reason: str = ""  # inconclusive: the sentence (interval vs margin, repetitions needed)
    looks: int = 1  # the planned looks both error rates were split over
    view: str = ""  # "per_gpu" | "total" where the cases' GPU counts differ; "" otherwise
    gated: bool = True  # False for the view that is shown, not gated
    # The smallest change (% of the baseline) these repetitions would call different with 80% power (stats.py),
    # the profile's ask (``detect_pct``) and the repetitions per side that would reach it where it is not met.
    detectable_pct: float | None = None
    detect_pct: float | None = None
    detect_repetitions: int | None = None

    @property
    def judged_by_equivalence(self) -> bool:
        return self.margin_pct is not None

    @property
    def undetectable(self) -> bool:
        """The profile asked to see a change of ``detect_pct`` and these repetitions could not."""
        return self.detect_pct is not None and (self.detectable_pct is None or self.detectable_pct > self.detect_pct)


@dataclass
class PerformanceComparison:
    """``failure`` also names every worse metric with ``on_worse: fail``; ``warnings`` every worse ``warn`` one
    (a passed comparison with warnings renders as a warning); ``saturated`` every side measured in saturation
    (rendered as a warning too: its latencies are not those of the asked rate)."""

    status: Status
    failure: str | None = None
    control: bool = False
    metrics: list[MetricComparison] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    sequential: SequentialRecord | None = None  # the candidate's ranged series, its looks and order
    # each side whose judged repetitions were saturated (``Repetition.load``), in a line: a warning, never a failure
    saturated: list[str] = field(default_factory=list)
    # each named load shape's own comparison (``workloads.bench.shapes``), judged on its own repetitions; the
    # status and failure above fold in every shape's (a shape that fails fails the comparison, naming the shape)
    shapes: dict[str, PerformanceComparison] = field(default_factory=dict)


@dataclass
class Comparison(_Sections):
    baseline: str
    candidate: str
    baseline_label: str
    candidate_label: str
    performance: PerformanceComparison | None = None
    model_runners: ModelRunners | None = None  # the runners each side ran (None: a side has no execution section)
    # measures of phases registered beyond the fields above, each under its own key in results.json
    extra: dict[str, Any] = field(default_factory=dict, metadata={EXTRAS: _registered_comparison_sections})


# ---- the run ------------------------------------------------------------------------------------------------------


@dataclass
class RunVerdict:
    status: Status
    reasons: list[str] = field(default_factory=list)


@dataclass
class Interruption:
    """A run whose runner vanished (SIGKILL, a lost agent), closed afterwards by ``afd-e2e cleanup``."""

    found_at: str  # ISO 8601 UTC
    how: str  # one line: what cleanup found


@dataclass
class RunResults:
    """The one record of a run, written from its first moment and after every step."""

    schema: str
    profile: str
    platform: str  # cuda or cpu
    smoke_only: bool
    status: Status
    started_at: str  # ISO 8601 UTC
    plan: RunPlan
    finished_at: str | None = None
    run_id: str | None = None
    build: BuildInfo | None = None  # None outside Buildkite
    environment: Environment = field(default_factory=Environment)
    preflight: PreflightRecord | None = None
    cases: dict[str, CaseResults] = field(default_factory=dict)
    comparisons: dict[str, Comparison] = field(default_factory=dict)
    verdict: RunVerdict = field(default_factory=lambda: RunVerdict(Status.RUNNING))
    interruption: Interruption | None = None
    busy_gpus: list[str] = field(default_factory=list)  # GPUs not idle at the start, run on under --allow-busy-gpus

    def case(self, case_id: str) -> CaseResults | None:
        return self.cases.get(case_id)

    @property
    def partial(self) -> bool:
        """The run did not reach its verdict: still running, cancelled, crashed or interrupted."""
        return self.status in (Status.RUNNING, Status.CANCELLED, Status.CRASHED, Status.INTERRUPTED)
