"""What the reports show of the built-in phases and case sections: their JUnit testcases, annotation parts,
columns of the per-case table, model output, files to upload and plots, registered with
``report.section_renderers``. Only the commands that render (run, report, join, trend) install these, so the cheap
ones (pipeline, plan, gates, profiles, preflight) import no renderer, numpy or matplotlib. A phase that registers
nothing here still gets a testcase per section it writes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from afd_e2e.phases import builtin, correctness
from afd_e2e.report import (
    annotation,
    capacity_report,
    execution_report,
    forensics_report,
    gsm8k_report,
    junit,
    parity_report,
    performance_report,
    profiler_report,
    replay_report,
    section_renderers,
    serving_report,
    smoke_report,
    soak_report,
    telemetry_report,
)
from afd_e2e.report.junit import SuiteTestcases
from afd_e2e.report.section_renderers import AnnotationPart, CaseColumn, SectionReport
from afd_e2e.results.capacity_records import CapacityComparison
from afd_e2e.results.model import CaseResults, Comparison, RunResults


def _capacity_testcases(suite: SuiteTestcases, case: CaseResults) -> None:
    if (section := case.section("capacity")) is not None:
        test = capacity_report.case_testcase(section)
        suite.add(test.name, test.status, message=test.message, stdout=test.stdout, elapsed=test.seconds)


def _capacity_comparison_testcases(suite: SuiteTestcases, comparison: Comparison, section: CapacityComparison) -> None:
    test = capacity_report.comparison_testcase(section, comparison.baseline_label, comparison.candidate_label)
    suite.add(test.name, test.status, message=test.message, stdout=test.stdout)


def _capacity_annotation(results: RunResults, plots: Mapping[str, str]) -> list[AnnotationPart]:
    text = capacity_report.capacity_section(results, plots)
    return [AnnotationPart(text, "Capacity at SLO")] if text else []


# the performance and capacity plots are drawn from results.json alone: their writers take no results folder
def _performance_plots(results: RunResults, out_dir: Path, plots_dir: Path) -> dict[str, Path]:
    return performance_report.write_performance_plots(results, plots_dir)


def _capacity_plots(results: RunResults, out_dir: Path, plots_dir: Path) -> dict[str, Path]:
    return capacity_report.write_capacity_plots(results, plots_dir)


PHASES = (
    SectionReport(
        smoke_report.SECTION,
        smoke_report.smoke_testcases,
        columns=(CaseColumn("Smoke", smoke_report.smoke_cell),),
        model_output=smoke_report.smoke_output,
    ),
    SectionReport(
        correctness.NAME,
        gsm8k_report.gsm8k_testcases,
        parity_report.parity_details,
        (CaseColumn("GSM8K strict match", gsm8k_report.gsm8k_cell), CaseColumn("Parity", parity_report.parity_cell)),
        model_output=gsm8k_report.gsm8k_output,
    ),
    SectionReport(replay_report.SECTION, replay_report.replay_testcases, replay_report.replay_tables),
    SectionReport(serving_report.SECTION, serving_report.serving_testcases, serving_report.serving_tables),
    SectionReport(
        profiler_report.SECTION,
        profiler_report.profiler_testcases,
        profiler_report.profiler_tables,
        artifacts=profiler_report.uploaded_traces,
    ),
    SectionReport(
        performance_report.SECTION,
        performance_report.performance_testcases,
        performance_report.performance_sections,
        plots=_performance_plots,
    ),
    SectionReport("capacity", _capacity_testcases, _capacity_annotation, plots=_capacity_plots),
    SectionReport(soak_report.SECTION, soak_report.soak_testcases, soak_report.soak_annotation),
)
MEASURES = (
    (parity_report.SECTION, parity_report.parity_testcases),
    (replay_report.SECTION, replay_report.replay_parity_testcases),
    (performance_report.SECTION, performance_report.performance_comparison_testcases),
    ("capacity", _capacity_comparison_testcases),
)
CASE_SECTIONS = (
    SectionReport("hygiene", junit.hygiene_testcases, annotation.hygiene_section),
    SectionReport("forensics", annotation=forensics_report.forensics_section),
    SectionReport(
        "telemetry", annotation=telemetry_report.telemetry_section, plots=telemetry_report.write_telemetry_plots
    ),
    SectionReport(
        execution_report.SECTION,
        execution_report.execution_testcases,
        execution_report.execution_section,
        (CaseColumn("Mode", execution_report.mode_cell),),
    ),
)
_TABLES = (section_renderers.PHASES, section_renderers.MEASURES, section_renderers.CASE_SECTIONS)


def install_renderers() -> None:
    """The built-in phases (``builtin.install_phases``) and their renderers, then the renderers' tables frozen, as
    ``builtin.install_phases`` freezes the phases' (a second call finds them frozen and does nothing)."""
    builtin.install_phases()
    if all(table.frozen for table in _TABLES):
        return
    for report in PHASES:
        section_renderers.PHASES.register(report.name, report)
    for measure, testcases in MEASURES:
        section_renderers.MEASURES.register(measure, testcases)
    for report in CASE_SECTIONS:
        section_renderers.CASE_SECTIONS.register(report.name, report)
    for table in _TABLES:
        table.freeze()


@contextmanager
def rendered(report: SectionReport) -> Iterator[SectionReport]:
    """A phase's renderers for the length of a ``with`` block (tests), after the built-in ones, which stay frozen."""
    install_renderers()
    with section_renderers.PHASES.extended(report.name, report):
        yield report
