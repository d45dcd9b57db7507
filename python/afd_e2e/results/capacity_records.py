"""The records of a capacity sweep in ``results.json``: each level a case was measured at, the capacity at SLO the
search found (with how precise it is), and the comparison of two cases' capacities.

Level metrics are means over the level's passed repetitions of ``vllm bench serve`` keys (``request_throughput``,
``output_throughput``, ``median_ttft_ms`` (p50), ``p90_ttft_ms``, ``p99_ttft_ms``, ... , ``request_goodput``;
``workloads/capacity_sweep/sweep.py`` LEVEL_METRICS); ``attainment`` is the share of the level's requests that met both
SLO targets, pooled over its passed repetitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from afd_e2e.results.performance_records import Repetition
from afd_e2e.results.status import Status, Verdict

# How a sweep ended: the capacity lies between two measured levels, below the lowest (the SLO is never met),
# above the highest (never missed), or nothing was measured.
BRACKETED = "bracketed"
NEVER_MEETS = "never meets"
NEVER_MISSES = "never misses"
NOT_MEASURED = "not measured"
OUTCOMES = (BRACKETED, NEVER_MEETS, NEVER_MISSES, NOT_MEASURED)

# What an end of a capacity interval is: where a line through the repetitions' 95% bands at the bracketing levels
# crosses the target, or only the bracket's own level (the band there reaches past the target, so the repetitions
# cannot place that end inside the bracket).
INTERVAL_CROSSING = "crossing"
INTERVAL_BRACKET = "bracket"
INTERVAL_ENDS = (INTERVAL_CROSSING, INTERVAL_BRACKET)


@dataclass
class CapacitySlo:
    ttft_ms: float
    tpot_ms: float
    attainment: float


@dataclass
class CapacityLevel:
    """One load level: its repetitions, and whether it met the SLO (None when no repetition passed)."""

    level: float
    status: Status  # passed: every repetition passed; failed: one did not; cancelled; skipped (with note)
    meets_slo: bool | None = None
    attainment: float | None = None
    attainments: list[float] = field(default_factory=list)  # per passed repetition
    metrics: dict[str, float] = field(default_factory=dict)
    repetitions: list[Repetition] = field(default_factory=list)
    far_miss: bool = False  # a repetition missed by far: the level's other repetitions and higher levels skipped
    failure: str | None = None
    note: str | None = None


@dataclass
class CapacityEstimate:
    """``capacity`` is interpolated where the pooled attainment crosses the target between ``passed_level`` and
    ``failed_level``; ``interval`` is where it may lie given the repetitions' spread at those two levels (95%),
    ordered and holding ``capacity``; ``interval_ends`` says of each end whether it is that spread's ``crossing``
    of the target or only the ``bracket``'s level (the spread reaches past the target there); ``cut_short``: the
    budget ran out before the bracket was one grid step wide."""

    outcome: str  # one of OUTCOMES
    text: str  # "capacity 6.2 req/s (95% interval 6.1 to 6.4), between 6 (passed, ...) and 6.5 (failed, ...)"
    capacity: float | None = None
    passed_level: float | None = None
    failed_level: float | None = None
    interval: list[float] | None = None
    interval_ends: list[str] | None = None  # [lower, upper], each one of INTERVAL_ENDS; None without an interval
    cut_short: bool = False


@dataclass
class CaseCapacity:
    status: Status
    variable: str  # request_rate | max_concurrency
    unit: str
    slo: CapacitySlo
    search: bool  # True: levels chosen by the search; False: explicit levels
    grid: list[float] = field(default_factory=list)
    levels: list[CapacityLevel] = field(default_factory=list)  # ascending by level
    estimate: CapacityEstimate | None = None
    gpus: int = 0  # devices the case occupies (0 on the CPU)
    meaningful: bool = True
    failure: str | None = None
    wall_s: float | None = None
    warmups: list[Repetition] = field(default_factory=list)


@dataclass
class CapacityComparison:
    """Capacity at SLO, candidate vs baseline (per GPU when their GPU counts differ): delta and its interval (the
    change over every pair of capacities the two sides' intervals admit, so it holds the delta), a verdict, and
    what a ``worse`` verdict does (``on_worse``)."""

    status: Status
    unit: str
    per_gpu: bool
    baseline: CapacityEstimate | None
    candidate: CapacityEstimate | None
    baseline_gpus: int = 0
    candidate_gpus: int = 0
    baseline_value: float | None = None  # the compared figure (per GPU when per_gpu)
    candidate_value: float | None = None
    delta_pct: float | None = None
    ci95_pct: list[float] | None = None
    verdict: Verdict = Verdict.INCONCLUSIVE
    on_worse: str = "warn"
    common_levels: list[float] = field(default_factory=list)
    failure: str | None = None
    warnings: list[str] = field(default_factory=list)
