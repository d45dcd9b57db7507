"""The report layer's table of renderers: each phase's and case section's JUnit testcases, annotation parts,
columns of the per-case table and plots, and each measure's comparison testcases. Phases register from above
(``afd_e2e.phases``); JUnit, the annotation and the plots render through it, in the order registered."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from afd_e2e.tables import Registry

if TYPE_CHECKING:
    from afd_e2e.report.junit import SuiteTestcases
    from afd_e2e.results.model import CaseResults, Comparison, RunResults


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
class SectionReport:
    """What the reports show of one phase or case section: its testcases in its case's suite, its annotation
    parts (given the plots by comparison id), its columns of the per-case table, its markdown lines in its
    case's block of the annotation's Model output (what the model said, shown in full), the files of the
    results folder it names for upload beside the artifact globs (``report/artifact_files.py``), by their paths,
    and its plots: given the results, their folder (for side files) and the plots folder, it writes its PNGs there
    and returns them by the key its annotation looks them up by (``report/render.py`` removes the PNGs of an
    earlier render first, so a writer only adds)."""

    name: str
    junit: Callable[[SuiteTestcases, CaseResults], None] | None = None
    annotation: Callable[[RunResults, Mapping[str, str]], list[AnnotationPart]] | None = None
    columns: tuple[CaseColumn, ...] = ()
    model_output: Callable[[CaseResults], list[str]] | None = None
    artifacts: Callable[[CaseResults], list[str]] | None = None
    plots: Callable[[RunResults, Path, Path], dict[str, Path]] | None = None


PHASES: Registry[SectionReport] = Registry("phases' renderers")
# after the phases: their parts and columns come last; named apart from the phases, as in the profile's catalogue
CASE_SECTIONS: Registry[SectionReport] = Registry("case sections' renderers", sharing_names_with=PHASES)
MEASURES: Registry[Callable[[SuiteTestcases, Comparison, Any], None]] = Registry("measures' testcases")


def section_reports() -> tuple[SectionReport, ...]:
    """Every phase's renderers, then every case section's: the order the reports show their parts in."""
    return (*PHASES.values(), *CASE_SECTIONS.values())


def case_columns() -> tuple[CaseColumn, ...]:
    """The per-case table's columns: every phase's, then every case section's."""
    return tuple(c for entry in section_reports() for c in entry.columns)
