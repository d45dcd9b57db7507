"""The results layer's table of sections: which case results sections each phase writes (in phase order), the case
sections no phase writes, and the comparison section each measure fills. A section whose type is not a field of
``CaseResults`` (or ``Comparison``) is stored beside them and written under its own key in results.json;
``afd-e2e schema results`` then lists it. Phases register their sections from above (``afd_e2e.phases``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from afd_e2e.tables import Registry


@dataclass(frozen=True)
class ResultsSection:
    """A section of a case's (or comparison's) results. ``type`` is only needed for a section that is not already
    a field of the record: it is then stored beside the fields and written under ``name`` in results.json."""

    name: str
    type: Any = None


PHASES: Registry[tuple[ResultsSection, ...]] = Registry("phases' results sections")  # phase -> what it writes
# written by no phase (hygiene, telemetry, ...): named apart from the phases, as in the profile's catalogue
CASE_SECTIONS: Registry[ResultsSection] = Registry("case results sections", sharing_names_with=PHASES)
MEASURES: Registry[ResultsSection] = Registry("measures' comparison sections")  # measure -> the section it fills


def written_sections() -> tuple[str, ...]:
    """Every case results section a phase writes, in phase order."""
    return tuple(s.name for sections in PHASES.values() for s in sections)


def phase_sections(phase: str) -> tuple[str, ...]:
    """The case results sections ``phase`` writes."""
    return tuple(s.name for s in PHASES.get(phase, ()))


def measure_sections() -> Mapping[str, str]:
    """measure -> the name of the comparison section it fills, in the order registered."""
    return {measure: section.name for measure, section in MEASURES.items()}


def extra_case_sections() -> Mapping[str, Any]:
    """Case results sections stored beside ``CaseResults``' fields: name -> type."""
    every = [s for sections in PHASES.values() for s in sections] + list(CASE_SECTIONS.values())
    return {s.name: s.type for s in every if s.type is not None}


def extra_comparison_sections() -> Mapping[str, Any]:
    """Comparison sections stored beside ``Comparison``'s fields: name -> type."""
    return {s.name: s.type for s in MEASURES.values() if s.type is not None}


def measure_warnings(section: object) -> list[str]:
    """A comparison measure section's warnings: its ``warnings`` (a worse metric or capacity under ``on_worse:
    warn``, a sweep cut short) and its ``saturated`` sides. The one list of them: they turn a passed run's
    annotation to a warning, and a passed measure's verdict line says it passed with them."""
    return [warning for field in ("warnings", "saturated") for warning in getattr(section, field, None) or []]
