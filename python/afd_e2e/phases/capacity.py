"""The ``capacity`` phase, defined once: a load sweep on the case's one launch that finds its capacity at SLO
(``workloads.capacity``, ``budgets.capacity_s``) and the ``capacity`` measure of a comparison. The parts live where
their layer is: the profile section in ``profile/capacity_spec.py``, the records in ``results/capacity_records.py``, the search,
the sweep and the comparison in ``workloads/capacity_sweep/``, the plots, tables and testcases in ``report/capacity_report.py``
(registered by ``phases/rendering.py``).
"""

from __future__ import annotations

from afd_e2e.phases.registry import Budget, Measure, Phase, ResultsSection, Workload
from afd_e2e.profile.capacity_spec import read_capacity
from afd_e2e.profile.model import Profile
from afd_e2e.results.capacity_records import CapacityComparison, CaseCapacity
from afd_e2e.workloads.capacity_sweep import sweep_phase

NAME = sweep_phase.SECTION


def _needs_section(profile: Profile) -> tuple[str, str] | None:
    if NAME in profile.workloads:
        return None
    return ("capacity phase without workloads.capacity", "add workloads.capacity (variable, levels or search, slo)")


CAPACITY = Phase(
    name=NAME,
    doc="a load sweep on one launch: the highest load meeting the SLO (vLLM's goodput), bracketed and interpolated",
    workloads=(Workload(NAME, read=read_capacity),),
    needs=_needs_section,
    budget=Budget("capacity_s", 3600.0, per="for the whole sweep", total=sweep_phase.phase_budget_s),
    run=sweep_phase.run_capacity,
    benches=True,
    sections=(ResultsSection(NAME, CaseCapacity),),
    measure=Measure(NAME, ResultsSection(NAME, CapacityComparison), sweep_phase.compare_cases, needs=_needs_section),
)
