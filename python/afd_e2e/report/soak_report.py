"""What the reports show of a soak (registered by ``phases/rendering.py``): a JUnit testcase per drift metric and
per role's memory kind, so a CI's test view names the one that failed, and an annotation section with one row per
soaked case: each drift's first and last thirds with its interval, each role's growth per 10 minutes against the
bound.
"""

from __future__ import annotations

from collections.abc import Mapping

from afd_e2e.report.junit import SuiteTestcases
from afd_e2e.report.section_renderers import AnnotationPart
from afd_e2e.report.status_icons import icon
from afd_e2e.results.model import CaseResults, RunResults
from afd_e2e.results.soak_records import CaseSoak, Drift, Leak
from afd_e2e.results.status import Status

SECTION = "soak"


def _status(passed: bool) -> Status:
    return Status.PASSED if passed else Status.FAILED


def _leak_text(leak: Leak) -> str:
    return (
        f"{leak.role} {leak.kind}: {leak.growth_mib_per_10min:+g} MiB per 10 min "
        f"({leak.first_mib:g} -> {leak.last_mib:g} MiB over {leak.samples} samples), "
        f"bound {leak.bound_mib_per_10min:g}"
    )


def soak_testcases(suite: SuiteTestcases, case: CaseResults) -> None:
    soak: CaseSoak | None = case.section(SECTION)
    if soak is None:
        return
    if not soak.drift and not soak.leaks:  # the repetition itself failed or was cancelled
        suite.add("soak", soak.status, message=soak.failure, output=suite.log_tail, whole=suite.logs)
        return
    for drift in soak.drift:
        suite.add(f"soak drift {drift.metric}", _status(drift.passed), message=drift.reason)
    for leak in soak.leaks:
        suite.add(f"soak leak {leak.role} {leak.kind}", _status(leak.passed), message=_leak_text(leak))
    if not soak.leaks:
        suite.add("soak leak", soak.status, message=soak.failure)


def _drift_cell(drift: Drift) -> str:
    return f"{icon(_status(drift.passed))} {drift.reason}"


def soak_annotation(results: RunResults, plots: Mapping[str, str]) -> list[AnnotationPart]:
    rows = []
    for case_id, case in results.cases.items():
        soak: CaseSoak | None = case.section(SECTION)
        if soak is None:
            continue
        drift = "<br>".join(_drift_cell(d) for d in soak.drift) or (soak.failure or "")
        leaks = "<br>".join(f"{icon(_status(leak.passed))} {_leak_text(leak)}" for leak in soak.leaks)
        load = f"{soak.duration_s:g} s at {soak.request_rate:g} req/s"
        rows.append(f"| {case_id} | {icon(soak.status)} | {load} | {drift} | {leaks} |")
    if not rows:
        return []
    head = (
        "### Soak\n\nDrift: the last third's window means against the first third's (95% Welch interval); "
        "memory: each role's growth from its first third of samples to its last, per 10 minutes.\n\n"
        "| Case | Soak | Load | Drift (last third vs first) | Memory growth |\n| --- | --- | --- | --- | --- |\n"
    )
    return [AnnotationPart(head + "\n".join(rows) + "\n", "Soak")]
