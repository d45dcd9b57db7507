"""A phase, described once, and ``register_phase``, which hands each part to the layer that owns its table.

A phase is pure data plus its functions: its name, budget and profile sections (``profile.catalogue``), the results
sections it fills (``results.result_sections``), its run function (``runner.dispatch``) and, for a measure, its compare
function (``workloads.comparisons``). What the reports show of it (JUnit testcases, annotation parts, columns) is
registered with ``report.section_renderers`` by ``afd_e2e.phases.rendering``, which only the commands that render import:
so loading a profile, planning or printing a pipeline never imports a renderer.

Adding a phase is one module that builds its ``Phase`` and one line in ``afd_e2e.phases.builtin``'s list, whose
``install_phases`` registers them and freezes the tables (a test adds a throwaway one with ``registered``). A section
whose type is not a field of ``CaseResults`` (or ``Comparison``) is stored beside them; ``afd-e2e schema results``
then lists it (regenerate ``results/schema.json``). A phase that registers no renderer still gets a JUnit testcase
per section it writes, from the section's ``status`` and ``failure``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from afd_e2e.profile import catalogue
from afd_e2e.profile.catalogue import Budget, MeasureEntry, PhaseEntry, SectionEntry, Workload, nothing_missing
from afd_e2e.results import result_sections
from afd_e2e.results.result_sections import ResultsSection
from afd_e2e.runner import dispatch
from afd_e2e.runner.dispatch import PhaseRun
from afd_e2e.tables import Registry
from afd_e2e.workloads import comparisons

if TYPE_CHECKING:
    from afd_e2e.plan.model import ComparisonPlan
    from afd_e2e.profile.model import Profile
    from afd_e2e.results.model import CaseResults
    from afd_e2e.workloads.context import PhaseContext, PhaseOutcome

__all__ = ["Budget", "CaseSection", "Measure", "Phase", "ResultsSection", "Workload", "register_phase", "registered"]


@dataclass(frozen=True)
class Measure:
    """What a comparison of two cases that both ran the phase measures: ``comparisons[].measures`` names it, and
    ``compare`` fills the comparison's ``section`` (the results folder last: side files the cases wrote there, one per
    case in a phase's folder). ``needs``: what the profile lacks for it and the fix, or None."""

    name: str
    section: ResultsSection
    compare: Callable[[Profile, ComparisonPlan, CaseResults | None, CaseResults | None, Path], Any]
    needs: Callable[[Profile], tuple[str, str] | None] = nothing_missing


@dataclass(frozen=True)
class Phase:
    """One workload phase, defined once. ``needs`` checks the profile can feed the phase: None, or the problem and
    its fix; ``check_inputs`` checks, at admission, what the phase will read (staged data, executables).
    ``sections`` are the case results sections it writes, in order."""

    name: str
    budget: Budget
    run: Callable[[PhaseContext], PhaseOutcome]
    sections: tuple[ResultsSection, ...]
    workloads: tuple[Workload, ...] = ()
    needs: Callable[[Profile], tuple[str, str] | None] = nothing_missing
    measure: Measure | None = None
    check_inputs: Callable[[Profile, Path | None], None] | None = None  # before any model loads: a UsageError
    ends_case: bool = False  # a failure ends its case: no later phase makes sense (the server does not answer)
    # the progress watchdog judges stalls while it runs (budgets.stall_s); False for a phase that may hold a request
    # open with no token moving by design (a torch profile's stop holds its request while the traces are written)
    stall_watched: bool = True
    # it runs ``vllm bench serve`` (in ``PhaseContext.bench_client`` where there is one): a case with such a phase
    # gets its warm bench client started with its servers, so the client's import of vLLM overlaps their start-up
    benches: bool = False
    doc: str = ""


@dataclass(frozen=True)
class CaseSection:
    """A case results section that no phase writes (hygiene, telemetry): its type and, where it has one, the
    budget it judges by (telemetry: ``budgets.stall_s``)."""

    name: str
    section: ResultsSection
    budget: Budget | None = None
    doc: str = ""


# Every table ``register_phase`` fills: ``afd_e2e.phases.builtin.install_phases`` freezes them once the built-in phases are in.
TABLES: tuple[Registry[Any], ...] = (
    catalogue.PHASES,
    catalogue.SECTIONS,
    catalogue.MEASURES,
    result_sections.PHASES,
    result_sections.CASE_SECTIONS,
    result_sections.MEASURES,
    dispatch.RUNS,
    comparisons.COMPARES,
)


def _parts(entry: Phase | CaseSection) -> list[tuple[Registry[Any], str, Any]]:
    """Each table ``entry`` has a part in, with the name and the part it holds there."""
    if isinstance(entry, CaseSection):
        return [
            (catalogue.SECTIONS, entry.name, SectionEntry(entry.name, entry.budget, entry.doc)),
            (result_sections.CASE_SECTIONS, entry.name, entry.section),
        ]
    run = PhaseRun(entry.name, entry.run, entry.check_inputs, entry.ends_case, entry.stall_watched, entry.benches)
    parts: list[tuple[Registry[Any], str, Any]] = [
        (catalogue.PHASES, entry.name, PhaseEntry(entry.name, entry.budget, entry.workloads, entry.needs, entry.doc)),
        (result_sections.PHASES, entry.name, entry.sections),
        (dispatch.RUNS, entry.name, run),
    ]
    if (measure := entry.measure) is not None:
        parts += [
            (catalogue.MEASURES, measure.name, MeasureEntry(measure.name, entry.name, measure.needs)),
            (result_sections.MEASURES, measure.name, measure.section),
            (comparisons.COMPARES, measure.name, measure.compare),
        ]
    return parts


def register_phase(entry: Phase | CaseSection) -> None:
    """Hand each part to its layer's table: a phase runs in the order registered; a name used twice is refused, and
    so is any once the tables are frozen."""
    for table, name, part in _parts(entry):
        table.register(name, part)


@contextmanager
def registered(entry: Phase | CaseSection) -> Iterator[Phase | CaseSection]:
    """``entry`` in every table for the length of a ``with`` block (tests), after the built-in phases, frozen or
    not: it is taken out again from every table it reached, however the block ends, so the frozen tables hold the
    built-ins alone again."""
    with ExitStack() as stack:
        for table, name, part in _parts(entry):
            stack.enter_context(table.extended(name, part))
        yield entry
