"""The records of ``results.json`` (schema ``afd-e2e/results/v2``): what a run measured, typed.

Everything downstream (JUnit, annotation, plots, Buildkite upload, the nightly trend) reads these records, never raw
JSON: ``load_results`` checks a file against them and ``results/schema.json`` is generated from them. Paths inside
are relative to the results folder. Statuses are ``Status`` (one vocabulary for runs, cases, phases and checks).
A field with a default may be missing from a file, so new optional fields keep older files readable. A phase's own
sections are records of its own (``results/<phase>_records.py``), stored beside these fields through the registry
(``result_sections``). ``plan.cases[].control`` and ``plan.comparisons[].control`` mark the forced-routing control,
which never enters the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from afd_e2e.plan.model import RunPlan
from afd_e2e.results import result_sections
from afd_e2e.results.codec import EXTRAS
from afd_e2e.results.execution_records import ModelRunners
from afd_e2e.results.status import Status

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
    hygiene: list[CheckRecord] = field(default_factory=list)
    forensics: list[CaseForensics] = field(default_factory=list)  # stacks of every process, on a failure
    # sections of phases registered beyond the fields above, each under its own key in results.json
    extra: dict[str, Any] = field(default_factory=dict, metadata={EXTRAS: _registered_case_sections})


# ---- comparisons --------------------------------------------------------------------------------------------------


@dataclass
class Comparison(_Sections):
    baseline: str
    candidate: str
    baseline_label: str
    candidate_label: str
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
