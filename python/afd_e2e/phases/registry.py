"""The phase registry: one ``Phase`` per workload phase and one ``CaseSection`` per other case section.

A phase is pure data plus its functions: its name, the profile sections it reads (and what it needs of them), its
budget key and default, its run function, its compare function where cases are compared, the results sections it
fills and its JUnit and annotation renderers. ``PHASES``, the budgets, the profile rules, the runner's dispatch and
phase writes, the verdict, the comparisons and both reports all read this registry; nothing else lists phases.

Adding a phase is one module that builds its ``Phase`` and one ``register`` call (the built-in phases register in
``afd_e2e.phases.builtin``; a test may register a throwaway one from its own module). A section whose type is not
a field of ``CaseResults`` (or ``Comparison``) is stored beside them and written under its own key in
results.json; ``afd-e2e schema results`` then lists it (regenerate ``results/schema.json``).

The registry sits above the layers it serves: those reach it through the functions here, which load the built-in
phases on first use, so importing it costs nothing and no import runs back up.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from afd_e2e.plan.model import ComparisonPlan
    from afd_e2e.profile.model import Profile
    from afd_e2e.profile.reader import Reader
    from afd_e2e.report.junit import SuiteTestcases
    from afd_e2e.results.model import CaseResults, Comparison, RunResults
    from afd_e2e.workloads.context import PhaseContext, PhaseOutcome

BUILTIN_MODULE = "afd_e2e.phases.builtin"


@dataclass(frozen=True)
class Budget:
    """``budgets.<key>`` in a profile, in seconds. ``total``, where given, turns the profile's value into the
    phase's whole budget (the performance phase: one value per repetition); ``per`` says so in a failure."""

    key: str
    default_s: float
    per: str = ""  # e.g. "per repetition"
    total: Callable[[Profile, float], float] | None = None

    @property
    def label(self) -> str:
        return f"budgets.{self.key}" + (f" {self.per}" if self.per else "")

    def seconds(self, profile: Profile) -> float:
        value = profile.budgets.seconds(self.key)
        return self.total(profile, value) if self.total else value


@dataclass(frozen=True)
class ResultsSection:
    """A section of a case's (or comparison's) results. ``type`` is only needed for a section that is not already
    a field of the record: it is then stored beside the fields and written under ``name`` in results.json."""

    name: str
    type: Any = None


@dataclass(frozen=True)
class Workload:
    """A ``workloads.<key>`` profile section a phase reads. ``read`` is given for a section the profile record does
    not declare as a field: its value is then kept in ``Profile.workloads[key]``."""

    key: str
    read: Callable[[Reader, Profile], Any] | None = None


@dataclass(frozen=True)
class AnnotationPart:
    """Markdown a renderer adds to the annotation. ``group`` "Correctness" appends to the per-case table's
    section, "Features" becomes a table of the Features section; None is a section of its own called ``title``."""

    text: str
    title: str = ""
    group: str | None = None
    essential: bool = True  # kept in the summary that replaces an over-size annotation


@dataclass(frozen=True)
class CaseColumn:
    """A column of the annotation's per-case table (Correctness): its header, alignment and cell."""

    header: str
    cell: Callable[[RunResults, str, CaseResults], str]
    align: str = "---"


@dataclass(frozen=True)
class Measure:
    """What a comparison of two cases that both ran the phase measures: ``comparisons[].measures`` names it, and
    ``compare`` fills the comparison's ``section`` (the results folder last: side files the cases wrote there, such as
    ``replay/<case>.jsonl``). ``needs``: what the profile lacks for it and the fix, or None."""

    name: str
    section: ResultsSection
    compare: Callable[[Profile, ComparisonPlan, CaseResults | None, CaseResults | None, Path], Any]
    needs: Callable[[Profile], tuple[str, str] | None] = lambda profile: None
    junit: Callable[[SuiteTestcases, Comparison, Any], None] | None = None


@dataclass(frozen=True)
class Phase:
    """One workload phase, defined once. ``needs`` checks the profile can feed the phase: None, or the problem and
    its fix; ``check_inputs`` checks, at admission, what the phase will read (staged data, executables). ``sections`` are the case results sections it writes, in order; ``junit`` adds its testcases to its
    case's suite; ``annotation`` and ``columns`` are what the annotation shows of it."""

    name: str
    budget: Budget
    run: Callable[[PhaseContext], PhaseOutcome]
    sections: tuple[ResultsSection, ...]
    junit: Callable[[SuiteTestcases, CaseResults], None]
    annotation: Callable[[RunResults, Mapping[str, str]], list[AnnotationPart]]  # plots by comparison id
    workloads: tuple[Workload, ...] = ()
    needs: Callable[[Profile], tuple[str, str] | None] = lambda profile: None
    columns: tuple[CaseColumn, ...] = ()
    measure: Measure | None = None
    check_inputs: Callable[[Profile, Path | None], None] | None = None  # before any model loads: a UsageError
    ends_case: bool = False  # a failure ends its case: no later phase makes sense (smoke)
    # the progress watchdog judges stalls while it runs (budgets.stall_s); False for a phase that may hold a request
    # open with no token moving by design (profiler: stop_profile writes the traces)
    stall_watched: bool = True
    doc: str = ""


@dataclass(frozen=True)
class CaseSection:
    """A case results section that no phase writes (hygiene, telemetry): its own home for its type, its
    renderers and, where it has one, the budget it judges by (telemetry: ``budgets.stall_s``)."""

    name: str
    section: ResultsSection
    budget: Budget | None = None
    junit: Callable[[SuiteTestcases, CaseResults], None] | None = None
    annotation: Callable[[RunResults, Mapping[str, str]], list[AnnotationPart]] | None = None
    columns: tuple[CaseColumn, ...] = ()  # after the phases' columns in the per-case table
    doc: str = ""


@dataclass
class _Registry:
    phases: dict[str, Phase] = field(default_factory=dict)
    sections: dict[str, CaseSection] = field(default_factory=dict)
    loaded: bool = False


_REGISTRY = _Registry()


def _loaded() -> _Registry:
    if not _REGISTRY.loaded:
        _REGISTRY.loaded = True
        importlib.import_module(BUILTIN_MODULE)  # registers the built-in phases and sections
    return _REGISTRY


def register(entry: Phase | CaseSection) -> Phase | CaseSection:
    """Add a phase (run in the order registered) or a case section; a name used twice is a bug, refused."""
    registry = _loaded()  # the built-in phases first, so they keep their order
    taken = set(registry.phases) | set(registry.sections)
    if entry.name in taken:
        raise ValueError(f"a phase or case section named {entry.name!r} is already registered")
    if isinstance(entry, Phase):
        registry.phases[entry.name] = entry
    else:
        registry.sections[entry.name] = entry
    return entry


def unregister(name: str) -> None:
    registry = _loaded()
    registry.phases.pop(name, None)
    registry.sections.pop(name, None)


@contextmanager
def registered(entry: Phase | CaseSection) -> Iterator[Phase | CaseSection]:
    """``register`` for the length of a ``with`` block (tests)."""
    _loaded()
    register(entry)
    try:
        yield entry
    finally:
        unregister(entry.name)


def phases() -> tuple[Phase, ...]:
    """Every phase, in the order a case runs them."""
    return tuple(_loaded().phases.values())


def phase_names() -> tuple[str, ...]:
    return tuple(_loaded().phases)


def phase(name: str) -> Phase:
    try:
        return _loaded().phases[name]
    except KeyError:
        raise KeyError(f"no phase {name!r} is registered (known: {', '.join(phase_names())})") from None


def case_sections() -> tuple[CaseSection, ...]:
    """The case sections no phase writes."""
    return tuple(_loaded().sections.values())


def case_columns() -> tuple[CaseColumn, ...]:
    """The per-case table's columns: every phase's, then every case section's."""
    return tuple(c for entry in (*phases(), *case_sections()) for c in entry.columns)


def measures() -> tuple[Measure, ...]:
    """What comparisons can measure, in phase order."""
    return tuple(p.measure for p in phases() if p.measure is not None)


def measure_phase(measure: str) -> Phase:
    return next(p for p in phases() if p.measure is not None and p.measure.name == measure)


def stall_watched_phases() -> frozenset[str]:
    """The phases during which requests in flight with no token moving is a stall."""
    return frozenset(p.name for p in phases() if p.stall_watched)


def budget_keys() -> dict[str, float]:
    """Every phase's and case section's budget key and its default seconds."""
    sections = {c.budget.key: c.budget.default_s for c in case_sections() if c.budget is not None}
    return {**{p.budget.key: p.budget.default_s for p in phases()}, **sections}


def written_sections() -> tuple[str, ...]:
    """Every case results section a phase writes, in phase order."""
    return tuple(s.name for p in phases() for s in p.sections)


def extra_case_sections() -> Mapping[str, Any]:
    """Case results sections stored beside ``CaseResults``' fields: name -> type."""
    sections = [s for p in phases() for s in p.sections] + [c.section for c in case_sections()]
    return {s.name: s.type for s in sections if s.type is not None}


def extra_comparison_sections() -> Mapping[str, Any]:
    """Comparison sections stored beside ``Comparison``'s fields: name -> type."""
    return {m.section.name: m.section.type for m in measures() if m.section.type is not None}


def extra_workloads() -> tuple[Workload, ...]:
    """``workloads.<key>`` sections the profile record does not declare, read by their phase."""
    return tuple(w for p in phases() for w in p.workloads if w.read is not None)


def case_budget_s(profile: Profile, case_phases: tuple[str, ...]) -> float:
    """A whole case: start-up, its phases' budgets and teardown."""
    budgets = profile.budgets
    return budgets.startup_s + sum(phase(name).budget.seconds(profile) for name in case_phases) + budgets.teardown_s
