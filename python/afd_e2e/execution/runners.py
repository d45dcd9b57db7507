"""Whether a comparison's two sides ran the same model runner, from each role's own log (``execution`` section).

A parity or performance verdict between a V2 baseline and a V1 candidate is partly a verdict about the runner (the
12-05 GPU run: vLLM 0.26 picked V2 for the native DeepSeek-V2 servers while every AFD child asked for V1). So the
sides must match, unless the cases ask for different runners on purpose (a case's own ``model_runner``) and each
side ran what it asked; a side whose log names no runner leaves the match a warning.
"""

from __future__ import annotations

from afd_e2e.execution.judge import runner_name
from afd_e2e.results.execution_records import SECTION, CaseExecution, ModelRunners
from afd_e2e.results.model import RunResults
from afd_e2e.results.status import Status

FIX = "set engine.model_runner (v1 or v2) so both sides start the same runner, or give a case its own model_runner"


def _shown(section: CaseExecution) -> list[str]:
    """Each role's runner as its log shows it, "" where no line does (or it has no log here)."""
    return sorted({(role.startup.model_runner or "") if role.startup else "" for role in section.roles})


def _words(runners: list[str]) -> str:
    return "/".join(runner_name(r or None) for r in runners)


def match_runners(baseline: CaseExecution | None, candidate: CaseExecution | None) -> ModelRunners | None:
    """The match, or None where a side has no execution section (it never got ready: nothing ran to compare)."""
    if baseline is None or candidate is None or not baseline.roles or not candidate.roles:
        return None
    shown = _shown(baseline), _shown(candidate)
    words = f"baseline {_words(shown[0])}, candidate {_words(shown[1])}"
    asked = [{role.asked.model_runner for role in side.roles} for side in (baseline, candidate)]
    if "" in shown[0] or "" in shown[1]:
        return ModelRunners(Status.WARNED, *shown, False, f"model runner not shown by every log: {words}")
    if shown[0] == shown[1]:
        return ModelRunners(Status.PASSED, *shown, False, f"both sides ran model runner {_words(shown[0])}")
    declared = all(len(a) == 1 and None not in a for a in asked) and asked[0] != asked[1]
    declared = declared and [sorted(a) for a in asked] == list(shown)
    if declared:
        return ModelRunners(Status.PASSED, *shown, True, f"model runners differ as the cases declare: {words}")
    return ModelRunners(Status.FAILED, *shown, False, f"model runners differ: {words}; fix: {FIX}")


def match_model_runners(results: RunResults) -> None:
    """Fill each comparison's ``model_runners`` from its two cases' execution sections (a forced-routing control
    compares a case with itself re-routed and stays out of the verdict: none)."""
    controls = {c.id for c in results.plan.comparisons if c.control}
    for comparison_id, comparison in results.comparisons.items():
        if comparison_id in controls:
            continue
        sides = [results.case(case_id) for case_id in (comparison.baseline, comparison.candidate)]
        sections = [case.section(SECTION) if case is not None else None for case in sides]
        comparison.model_runners = match_runners(*sections)
