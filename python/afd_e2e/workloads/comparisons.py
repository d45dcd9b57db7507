"""The table of compare functions: for each measure ``comparisons[].measures`` may name, the function that fills a
comparison's section from its two cases (the results folder last: side files the cases wrote there, such as
``replay/<case>.jsonl``). Phases register from above (``afd_e2e.phases``); ``workloads.phases.compare`` reads it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from afd_e2e.plan.model import ComparisonPlan
    from afd_e2e.profile.model import Profile
    from afd_e2e.results.model import CaseResults

Compare = Callable[["Profile", "ComparisonPlan", "CaseResults | None", "CaseResults | None", Path], Any]

_COMPARES: dict[str, Compare] = {}


def register(measure: str, compare: Compare) -> None:
    if measure in _COMPARES:
        raise ValueError(f"a compare function for measure {measure!r} is already registered")
    _COMPARES[measure] = compare


def unregister(measure: str) -> None:
    _COMPARES.pop(measure, None)


def compare_function(measure: str) -> Compare:
    return _COMPARES[measure]
