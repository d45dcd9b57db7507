"""The records of a case's ``execution`` section in ``results.json``: per role, the execution mode its case asked
for (from the role's planned argv), what the engine showed at start-up (its own log lines) and at run time (its
torch profiler trace, where the profiler phase ran), and the verdict.

Counts are per step kind where the trace tells prefill from decode (vLLM's ``execute_context_N(T)_generation_M(G)``
step annotation: a step with a context request is a prefill step, else a decode step); ``split`` false means the
trace has no step annotations and only the totals are known.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from afd_e2e.results.status import Proof, Status

MAX_EVIDENCE_LINES = 6  # exact log lines kept per role
MAX_LINE_CHARS = 300  # each cut at its end, saying so
SECTION = "execution"  # its key in a case's results


@dataclass
class ExecutionAsked:
    """What a role's argv asks: ``mode`` is ``eager``, ``compiled`` or ``cuda graphs``; ``compile_mode`` and
    ``cudagraph_mode`` as given (None: the engine's default), ``capture_sizes`` from the capture flags."""

    mode: str
    text: str  # in words: "compiled, CUDA graphs FULL_DECODE_ONLY at 1 size (64)"
    compile_mode: str | None = None
    cudagraph_mode: str | None = None
    capture_sizes: list[int] = field(default_factory=list)
    dbo: bool = False
    connector: str | None = None
    model_runner: str | None = None  # v1 or v2 as the child's environment asks; None: vLLM's own choice


@dataclass
class StartupEvidence:
    """What the role's log says about its start-up. ``engine_*``: the engine's own resolved config line;
    ``compiled``/``graphs_captured``/``eager``: whether a line says so (None: no line either way)."""

    log: str  # logs/<case>/<process>.log
    engine_compile_mode: str | None = None
    engine_cudagraph_mode: str | None = None
    engine_capture_sizes: list[int] = field(default_factory=list)
    compiled: bool | None = None
    compile_s: float | None = None
    eager: bool | None = None
    graphs_captured: bool | None = None
    capture_modes: list[str] = field(default_factory=list)  # "decode, FULL", "mixed prefill-decode, PIECEWISE"
    capture_s: float | None = None
    capture_gib: float | None = None
    connector_line: bool = False
    model_runner: str | None = None  # v1 or v2, as the log shows it (None: no line tells)
    lines: list[str] = field(default_factory=list)  # at most MAX_EVIDENCE_LINES, exact (cut at MAX_LINE_CHARS)


@dataclass
class StepCounts:
    steps: int = 0
    graph_launches: int = 0
    kernel_launches: int = 0

    @property
    def graphs_per_step(self) -> float | None:
        return self.graph_launches / self.steps if self.steps else None

    @property
    def kernels_per_step(self) -> float | None:
        return self.kernel_launches / self.steps if self.steps else None


@dataclass
class RuntimeEvidence:
    """Launches counted in the role's profiler traces (``traces``: relative paths)."""

    traces: list[str]
    split: bool  # the trace annotates its steps: prefill and decode are told apart
    total: StepCounts = field(default_factory=StepCounts)
    prefill: StepCounts = field(default_factory=StepCounts)
    decode: StepCounts = field(default_factory=StepCounts)


@dataclass
class MicroBatches:
    """A DBO role's steps after start-up (``started``: its log has the API server's ready line), per rank as its log
    prefix names it (``EngineCore_DP0``): split into micro-batches or not (``execution/dbo.py``)."""

    started: bool
    split: dict[str, int] = field(default_factory=dict)  # every rank that logged a step, 0 where none split
    unsplit: dict[str, int] = field(default_factory=dict)
    split_line: str | None = None  # the first split step's line, exact (cut at MAX_LINE_CHARS)
    unsplit_line: str | None = None


@dataclass
class RoleExecution:
    role: str  # native, attention, ffn
    process: str
    asked: ExecutionAsked
    proof: Proof
    reason: str  # one line: why this verdict, with the counts
    would_prove: str | None = None  # for unproven: what evidence would decide it
    startup: StartupEvidence | None = None
    runtime: RuntimeEvidence | None = None
    microbatches: MicroBatches | None = None  # a role that asked for DBO and schedules batches (native, attention)


@dataclass
class CaseExecution:
    """``status``: failed when a role is contradicted (or unproven under ``require_proof``), warned when one is
    unproven, else passed."""

    status: Status
    require_proof: bool
    roles: list[RoleExecution] = field(default_factory=list)
    failure: str | None = None

    @property
    def proof(self) -> Proof:
        """The case's verdict: contradicted if a role is, else unproven if a role is, else proven."""
        proofs = {role.proof for role in self.roles}
        for proof in (Proof.CONTRADICTED, Proof.UNPROVEN):
            if proof in proofs:
                return proof
        return Proof.PROVEN if self.roles else Proof.UNPROVEN


@dataclass
class ModelRunners:
    """A comparison's two sides' model runners as their logs show them (each side: its roles' runners, ``v1``,
    ``v2``). ``status``: passed when both ran the same runner, or different ones the cases declare on purpose
    (``declared``); failed when they differ otherwise; warned when a side's log shows none."""

    status: Status
    baseline: list[str]
    candidate: list[str]
    declared: bool
    text: str  # one line, with the fix where it failed
