"""The record of the performance phase in ``results.json``: under each case's ``performance`` key its warmups and
formal repetitions of ``vllm bench serve`` (each with its load and the saturation rule's figures), a ranged series'
looks, order and blocks, and each named load shape's own series; under each comparison's ``performance`` key every
gated metric of the two cases compared (each side's mean, std and noise, the delta, both intervals, the verdict and
its gate), per shape too. Written by ``afd_e2e.phases.performance`` (the runner's ranged series adds repetitions
and its record), judged by ``workloads/performance_comparison.py``, shown by ``report/performance_report.py``.

These records live in the results layer, below the phases, because the layers under them read them too: the
runner's series and its case verdict, the capacity sweep's and the soak's repetitions (a ``Repetition`` each), a
bisect's bench values and the trend's metrics. Metric keys are ``vllm bench serve`` result keys
(request_throughput, output_throughput, mean_ttft_ms, ..., p99_*); a metric's direction is a ``Verdict``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from afd_e2e.plan.model import REPETITIONS, planned_looks
from afd_e2e.results.model import CheckRecord, ProcessRecord
from afd_e2e.results.status import Saturation, Status, Verdict

SECTION = "performance"  # the case's section and the comparison's, each under this key


# ---- a case -------------------------------------------------------------------------------------------------------


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
