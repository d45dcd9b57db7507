"""The comparison of finished cases: the table of compare functions (for each measure ``comparisons[].measures``
may name, the function that fills a comparison's section from its two cases, the results folder last: side files
the cases wrote there, one per case in a phase's folder) and ``run_comparisons``, which runs them for every planned
comparison. Phases register from above (``afd_e2e.phases``); the runner calls ``run_comparisons`` once its cases
are done."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from afd_e2e.profile import catalogue
from afd_e2e.results import result_sections
from afd_e2e.results.model import Comparison
from afd_e2e.tables import Registry

if TYPE_CHECKING:
    from afd_e2e.plan.model import ComparisonPlan
    from afd_e2e.profile.model import Profile
    from afd_e2e.results.model import CaseResults, RunResults

Compare = Callable[["Profile", "ComparisonPlan", "CaseResults | None", "CaseResults | None", Path], Any]

COMPARES: Registry[Compare] = Registry("compare functions")  # measure -> its compare function


def run_comparisons(profile: Profile, results: RunResults, out_dir: Path) -> dict[str, Comparison]:
    """The ``comparisons`` section, from the plan's comparisons (controls included, marked) and the cases' results
    (and the side files they wrote in ``out_dir``): each registered measure the comparison names, by its phase's
    compare function."""
    labels = {c.id: c.label for c in results.plan.cases}
    comparisons: dict[str, Comparison] = {}
    for cmp in results.plan.comparisons:
        base, cand = results.case(cmp.baseline), results.case(cmp.candidate)
        entry = Comparison(cmp.baseline, cmp.candidate, *_told_apart(labels, cmp.baseline, cmp.candidate))
        for measure, section in result_sections.measure_sections().items():
            if measure in cmp.measures and catalogue.MEASURES[measure].needs(profile) is None:
                entry.set_section(section, COMPARES[measure](profile, cmp, base, cand, out_dir))
        comparisons[cmp.id] = entry
    return comparisons


def _told_apart(labels: dict[str, str], baseline: str, candidate: str) -> tuple[str, str]:
    """The two cases' labels, each followed by its id where they read the same (a case and its twin on another
    agent, a variant that changes no label): a report's "vs" and its column headers must tell them apart."""
    if labels[baseline] != labels[candidate]:
        return labels[baseline], labels[candidate]
    return f"{labels[baseline]} ({baseline})", f"{labels[candidate]} ({candidate})"
