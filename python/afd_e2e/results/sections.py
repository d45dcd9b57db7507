"""The results layer's table of sections: which case results sections each phase writes (in phase order), the case
sections no phase writes, and the comparison section each measure fills. A section whose type is not a field of
``CaseResults`` (or ``Comparison``) is stored beside them and written under its own key in results.json;
``afd-e2e schema results`` then lists it. Phases register their sections from above (``afd_e2e.phases``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ResultsSection:
    """A section of a case's (or comparison's) results. ``type`` is only needed for a section that is not already
    a field of the record: it is then stored beside the fields and written under ``name`` in results.json."""

    name: str
    type: Any = None


_PHASE_SECTIONS: dict[str, tuple[ResultsSection, ...]] = {}  # phase -> the sections it writes
_CASE_SECTIONS: dict[str, ResultsSection] = {}  # written by no phase (hygiene, telemetry, ...)
_MEASURE_SECTIONS: dict[str, ResultsSection] = {}  # measure -> the comparison section it fills


def register_phase(phase: str, sections: tuple[ResultsSection, ...]) -> None:
    _refuse_taken(phase, _PHASE_SECTIONS, _CASE_SECTIONS)
    _PHASE_SECTIONS[phase] = sections


def register_case_section(section: ResultsSection) -> None:
    _refuse_taken(section.name, _PHASE_SECTIONS, _CASE_SECTIONS)
    _CASE_SECTIONS[section.name] = section


def register_measure(measure: str, section: ResultsSection) -> None:
    _refuse_taken(measure, _MEASURE_SECTIONS)
    _MEASURE_SECTIONS[measure] = section


def _refuse_taken(name: str, *tables: Mapping[str, object]) -> None:
    if any(name in table for table in tables):
        raise ValueError(f"results sections for {name!r} are already registered")


def unregister(name: str) -> None:
    for table in (_PHASE_SECTIONS, _CASE_SECTIONS, _MEASURE_SECTIONS):
        table.pop(name, None)


def written_sections() -> tuple[str, ...]:
    """Every case results section a phase writes, in phase order."""
    return tuple(s.name for sections in _PHASE_SECTIONS.values() for s in sections)


def phase_sections(phase: str) -> tuple[str, ...]:
    """The case results sections ``phase`` writes."""
    return tuple(s.name for s in _PHASE_SECTIONS.get(phase, ()))


def measure_sections() -> Mapping[str, str]:
    """measure -> the name of the comparison section it fills, in the order registered."""
    return {measure: section.name for measure, section in _MEASURE_SECTIONS.items()}


def extra_case_sections() -> Mapping[str, Any]:
    """Case results sections stored beside ``CaseResults``' fields: name -> type."""
    every = [s for sections in _PHASE_SECTIONS.values() for s in sections] + list(_CASE_SECTIONS.values())
    return {s.name: s.type for s in every if s.type is not None}


def extra_comparison_sections() -> Mapping[str, Any]:
    """Comparison sections stored beside ``Comparison``'s fields: name -> type."""
    return {s.name: s.type for s in _MEASURE_SECTIONS.values() if s.type is not None}


def measure_warnings(section: object) -> list[str]:
    """A comparison measure section's warnings: its ``warnings`` (a worse metric or capacity under ``on_worse:
    warn``, a sweep cut short) and its ``saturated`` sides. The one list of them: they turn a passed run's
    annotation to a warning, and a passed measure's verdict line says it passed with them."""
    return [warning for field in ("warnings", "saturated") for warning in getattr(section, field, None) or []]
