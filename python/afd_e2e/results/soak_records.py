"""The records of a soak in ``results.json``: the drift of TPOT and TTFT from the soak's first third to its last,
and each role's memory growth (RSS, and GPU memory where the role has GPUs) per 10 minutes, each against its bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from afd_e2e.results.performance_records import Repetition
from afd_e2e.results.status import Status, Verdict

RSS = "RSS"
GPU_MEMORY = "GPU memory"


@dataclass
class Drift:
    """One latency metric's last third against its first: each third's window means (ms), the delta of their means
    and its 95% Welch interval (% of the first third), the verdict (``worse``: the interval lies above zero and the
    delta beyond ``drift_pct``), and whether it passed."""

    metric: str  # "TPOT" or "TTFT"
    first_ms: list[float]
    last_ms: list[float]
    delta_pct: float | None
    ci95_pct: list[float] | None
    verdict: Verdict
    passed: bool
    reason: str = ""


@dataclass
class Leak:
    """One role's memory of one kind over the soak: the mean of its first and last thirds of samples (MiB), the
    growth per 10 minutes between them, the bound, and whether it stayed within."""

    role: str
    kind: str  # RSS or GPU memory
    first_mib: float
    last_mib: float
    samples: int
    growth_mib_per_10min: float
    bound_mib_per_10min: float
    passed: bool


@dataclass
class CaseSoak:
    """The ``soak`` section of a case: the one long repetition, its drift and leak verdicts, and the first failure."""

    status: Status
    failure: str | None = None
    duration_s: float = 0.0  # asked
    request_rate: float = 0.0
    windows: int = 0  # per third
    drift_pct: float = 0.0
    repetition: Repetition | None = None
    drift: list[Drift] = field(default_factory=list)
    leaks: list[Leak] = field(default_factory=list)
