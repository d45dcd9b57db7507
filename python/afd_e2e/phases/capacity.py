"""The ``capacity`` phase, defined once: a load sweep on the case's one launch that finds its capacity at SLO
(``workloads.capacity``, ``budgets.capacity_s``), the ``capacity`` measure of a comparison, and what the reports
show of both. The parts live where their layer is: the profile section in ``profile/capacity.py``, the records in
``results/capacity.py``, the search, the sweep and the comparison in ``workloads/capacity/``, the plots, tables and
testcases in ``report/capacity.py``.
"""

from __future__ import annotations

from collections.abc import Mapping

from afd_e2e.phases.registry import AnnotationPart, Budget, Measure, Phase, ResultsSection, Workload
from afd_e2e.profile.capacity import read_capacity
from afd_e2e.profile.model import Profile
from afd_e2e.report import capacity as report
from afd_e2e.report.junit import SuiteTestcases
from afd_e2e.results.capacity import CapacityComparison, CaseCapacity
from afd_e2e.results.model import CaseResults, Comparison, RunResults
from afd_e2e.workloads.capacity import phase as sweep_phase

NAME = sweep_phase.SECTION


def _needs_section(profile: Profile) -> tuple[str, str] | None:
    if NAME in profile.workloads:
        return None
    return ("capacity phase without workloads.capacity", "add workloads.capacity (variable, levels or search, slo)")


def _case_testcases(suite: SuiteTestcases, case: CaseResults) -> None:
    if (section := case.section(NAME)) is not None:
        test = report.case_testcase(section)
        suite.add(test.name, test.status, message=test.message, stdout=test.stdout, elapsed=test.seconds)


def _comparison_testcases(suite: SuiteTestcases, comparison: Comparison, section: CapacityComparison) -> None:
    test = report.comparison_testcase(section, comparison.baseline_label, comparison.candidate_label)
    suite.add(test.name, test.status, message=test.message, stdout=test.stdout)


def _annotation(results: RunResults, plots: Mapping[str, str]) -> list[AnnotationPart]:
    text = report.capacity_section(results, plots)
    return [AnnotationPart(text, "Capacity at SLO")] if text else []


CAPACITY = Phase(
    name=NAME,
    doc="a load sweep on one launch: the highest load meeting the SLO (vLLM's goodput), bracketed and interpolated",
    workloads=(Workload(NAME, read=read_capacity),),
    needs=_needs_section,
    budget=Budget("capacity_s", 3600.0, per="for the whole sweep", total=sweep_phase.phase_budget_s),
    run=sweep_phase.run_capacity,
    sections=(ResultsSection(NAME, CaseCapacity),),
    junit=_case_testcases,
    annotation=_annotation,
    measure=Measure(
        NAME,
        ResultsSection(NAME, CapacityComparison),
        sweep_phase.compare_cases,
        needs=_needs_section,
        junit=_comparison_testcases,
    ),
)
