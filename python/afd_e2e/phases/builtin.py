"""The built-in phases, in the order a case runs them, and the case sections no phase writes.

Each descriptor names, once, what the layers below the reports need of its phase: the profile sections it reads
and what it needs of them, its budget, its run and compare functions and its results sections. What the reports
show of each is in ``afd_e2e.phases.rendering``. Adding a phase: one module building its ``Phase`` (see
``afd_e2e.phases.registry``) and one line in ``BUILTIN`` below. ``install_phases`` registers them all and freezes the
tables; the entry points call it (``cli.main``, the benchmarks, the test conftest).
"""

from __future__ import annotations

from afd_e2e.phases.capacity import CAPACITY
from afd_e2e.phases.correctness import CORRECTNESS
from afd_e2e.phases.execution_section import EXECUTION
from afd_e2e.phases.performance import PERFORMANCE
from afd_e2e.phases.profiler import PROFILER
from afd_e2e.phases.registry import (
    TABLES,
    Budget,
    CaseSection,
    ResultsSection,
    register_phase,
)
from afd_e2e.phases.replay import REPLAY
from afd_e2e.phases.serving import SERVING
from afd_e2e.phases.smoke import SMOKE
from afd_e2e.phases.soak import SOAK
from afd_e2e.phases.warmup import WARMUP
from afd_e2e.results.model import TelemetrySummary

HYGIENE = CaseSection(
    name="hygiene",
    doc="the after-the-fact checks of a stopped case: processes, ports, GPU memory, forced kill, leftover files",
    section=ResultsSection("hygiene"),
)

FORENSICS = CaseSection(
    name="forensics",
    doc="the state and stacks of every process of a case, taken when it died, stalled or ran out of time",
    section=ResultsSection("forensics"),
)

TELEMETRY = CaseSection(
    name="telemetry",
    doc="the 1 Hz timeline of every role's engine metrics, processes and GPUs; the progress watchdog's stalls",
    section=ResultsSection("telemetry", TelemetrySummary),
    budget=Budget("stall_s", 30.0),
)

BUILTIN = (
    SMOKE,
    WARMUP,
    CORRECTNESS,
    REPLAY,
    SERVING,
    PROFILER,
    PERFORMANCE,
    CAPACITY,
    SOAK,
    HYGIENE,
    FORENSICS,
    TELEMETRY,
    EXECUTION,
)


def install_phases() -> None:
    """Register every built-in phase and case section, then freeze the tables: nothing registers once profiles may
    have been read against them. Every entry point calls it, the test conftest before them; a second call finds the
    tables frozen, the built-ins in them, and does nothing, so the freeze is the only record of an install."""
    if all(table.frozen for table in TABLES):
        return
    for entry in BUILTIN:
        register_phase(entry)
    for table in TABLES:
        table.freeze()
