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
from afd_e2e.phases.profiler import PROFILER
from afd_e2e.phases.registry import (
    TABLES,
    Budget,
    CaseSection,
    Measure,
    Phase,
    ResultsSection,
    Workload,
    register_phase,
)
from afd_e2e.phases.replay import REPLAY
from afd_e2e.phases.serving import SERVING
from afd_e2e.phases.smoke import SMOKE
from afd_e2e.phases.soak import SOAK
from afd_e2e.phases.warmup import WARMUP
from afd_e2e.profile.model import Profile
from afd_e2e.results.model import TelemetrySummary
from afd_e2e.workloads import builtin_phases


def _performance_budget(profile: Profile, per_repetition_s: float) -> float:
    """Every warmup and formal repetition's budget, each named shape's too, plus one request for the model card."""
    specs = (profile.bench, *(spec for _, spec in profile.bench.shapes)) if profile.bench else ()
    repetitions = sum(spec.warmups + spec.most_repetitions for spec in specs)
    return repetitions * per_repetition_s + profile.budgets.request_s


def _needs(condition: bool, problem: str, fix: str) -> tuple[str, str] | None:
    return None if condition else (problem, fix)


PERFORMANCE = Phase(
    name="performance",
    doc="warmups and formal repetitions of `vllm bench serve`",
    workloads=(Workload("bench"),),
    needs=lambda p: _needs(p.bench is not None, "performance phase without workloads.bench", "add workloads.bench"),
    budget=Budget("bench_repetition_s", 3600.0, per="per repetition", total=_performance_budget),
    run=builtin_phases.run_performance,
    check_inputs=builtin_phases.check_performance_inputs,
    sections=(ResultsSection("performance"),),
    measure=Measure(
        "performance",
        ResultsSection("performance"),
        builtin_phases.compare_performance,
        needs=lambda p: _needs(p.bench is not None, "performance measure without workloads.bench", "add it"),
    ),
)

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
