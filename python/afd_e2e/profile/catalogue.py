"""The profile layer's table of phases: every phase's name, budget and profile sections, the measures comparisons
may name and the case sections that carry a budget. A phase registers its entry from above (``afd_e2e.phases``);
the profile's readers and rules, the budgets and the pipeline's step timeouts read it here, so reading a profile
loads no runner or renderer. Registration order is the order a case runs its phases."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from afd_e2e.errors import UsageError
from afd_e2e.tables import Registry

if TYPE_CHECKING:
    from afd_e2e.profile.model import Profile
    from afd_e2e.profile.reader import Reader

Needs = Callable[["Profile"], "tuple[str, str] | None"]


def nothing_missing(profile: Profile) -> tuple[str, str] | None:
    """``needs`` of a phase or measure any profile can feed."""
    return None


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
class Workload:
    """A ``workloads.<key>`` profile section a phase reads. ``read`` is given for a section the profile record does
    not declare as a field: its value is then kept in ``Profile.workloads[key]``."""

    key: str
    read: Callable[[Reader, Profile], Any] | None = None


@dataclass(frozen=True)
class PhaseEntry:
    """A phase as a profile knows it. ``needs`` checks the profile can feed the phase: None, or the problem and its
    fix."""

    name: str
    budget: Budget
    workloads: tuple[Workload, ...] = ()
    needs: Needs = nothing_missing
    doc: str = ""


@dataclass(frozen=True)
class MeasureEntry:
    """What ``comparisons[].measures`` may name: the phase both cases must run and what the profile must hold."""

    name: str
    phase: str
    needs: Needs = nothing_missing


@dataclass(frozen=True)
class SectionEntry:
    """A case section no phase writes (hygiene, telemetry), with the budget it judges by, if any."""

    name: str
    budget: Budget | None = None
    doc: str = ""


# A phase and a case section are both a case's sections: one namespace. Measures have their own (a measure is
# named after its phase, as performance and capacity are, or after the comparison section it fills).
PHASES: Registry[PhaseEntry] = Registry("phases")  # in the order a case runs them
SECTIONS: Registry[SectionEntry] = Registry("case sections", sharing_names_with=PHASES)
MEASURES: Registry[MeasureEntry] = Registry("measures")


def _phases() -> Registry[PhaseEntry]:
    """The table, refused while empty: a program that reads profiles without the built-in phases installed."""
    if not PHASES:
        raise UsageError(
            "no phases are installed, so no profile can be read",
            "call afd_e2e.phases.builtin.install_phases() first, as cli.main does",
        )
    return PHASES


def phases() -> tuple[PhaseEntry, ...]:
    """Every phase, in the order a case runs them."""
    return tuple(_phases().values())


def phase_names() -> tuple[str, ...]:
    return tuple(_phases())


def phase(name: str) -> PhaseEntry:
    return _phases()[name]


def budget_keys() -> dict[str, float]:
    """Every phase's and case section's budget key and its default seconds."""
    found = {p.budget.key: p.budget.default_s for p in _phases().values()}
    found.update({s.budget.key: s.budget.default_s for s in SECTIONS.values() if s.budget is not None})
    return found


def extra_workloads() -> tuple[Workload, ...]:
    """``workloads.<key>`` sections the profile record does not declare, read by their phase."""
    return tuple(w for p in PHASES.values() for w in p.workloads if w.read is not None)


def case_budget_s(profile: Profile, case_phases: tuple[str, ...]) -> float:
    """A whole case: start-up, its phases' budgets and teardown."""
    budgets = profile.budgets
    return budgets.startup_s + sum(phase(name).budget.seconds(profile) for name in case_phases) + budgets.teardown_s
