"""The table of compare functions: for each measure ``comparisons[].measures`` may name, the function that fills a
comparison's section from its two cases (the results folder last: side files the cases wrote there, one per case in
a phase's folder). Phases register from above (``afd_e2e.phases``); ``workloads.builtin_phases.run_comparisons`` reads it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from afd_e2e.tables import Registry

if TYPE_CHECKING:
    from afd_e2e.plan.model import ComparisonPlan
    from afd_e2e.profile.model import Profile
    from afd_e2e.results.model import CaseResults

Compare = Callable[["Profile", "ComparisonPlan", "CaseResults | None", "CaseResults | None", Path], Any]

COMPARES: Registry[Compare] = Registry("compare functions")  # measure -> its compare function
