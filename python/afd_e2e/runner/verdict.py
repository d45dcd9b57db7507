"""The run's verdict from its results (pure): the status and one line per case and comparison measure."""

from __future__ import annotations

from afd_e2e.results import result_sections
from afd_e2e.results.model import RunResults, RunVerdict
from afd_e2e.results.status import Status


def decide_verdict(
    results: RunResults, *, cancelled: str | None = None, crashed: str | None = None, interrupted: str | None = None
) -> RunVerdict:
    """Passed only when every case passed and no comparison measure failed; the reasons say why in one line each."""
    reasons: list[str] = []
    if interrupted:
        reasons.append(f"run interrupted: {interrupted}")
    if cancelled:
        reasons.append(f"run {cancelled}")
    if crashed:
        reasons.append(f"harness crashed: {crashed}")
    cases = results.cases
    misfits = [c for c in results.preflight.checks if c.status is Status.FAILED] if results.preflight else []
    reasons += [f"preflight {c.name}: {c.measured}" + (f" (wanted {c.wanted})" if c.wanted else "") for c in misfits]
    if not cases:
        reasons.append("no case ran" + (": the agent does not fit the profile" if misfits else ""))
    for case_id, case in cases.items():
        line = f"{case_id} ({case.label or case.kind}): {case.status}"
        reasons.append(line + (f": {case.failure}" if case.failure else ""))
        for name in result_sections.written_sections():
            part = case.section(name)
            if getattr(part, "status", None) is Status.SKIPPED:
                reasons.append(f"{case_id} {name}: skipped ({part.failure or 'not run'})")
    failed_measures = False
    for comparison_id, comparison in results.comparisons.items():
        if (runners := comparison.model_runners) is not None and runners.status is not Status.PASSED:
            reasons.append(f"{comparison_id} model runners: {runners.status}: {runners.text}")
            failed_measures |= runners.status.is_failure
        for measure, section in ((m, comparison.section(s)) for m, s in result_sections.measure_sections().items()):
            if section is None:
                continue
            if getattr(section, "control", False):
                reasons.append(
                    f"{comparison_id} {measure}: {section.status} (forced-routing control, not in the verdict)"
                )
                continue
            reasons.append(f"{comparison_id} {measure}: {section.status}{_with_warnings(section)}")
            failed_measures |= section.status.is_failure
    if interrupted:
        status = Status.INTERRUPTED
    elif cancelled:
        status = Status.CANCELLED
    elif crashed or any(case.status is Status.CRASHED for case in cases.values()):
        status = Status.CRASHED
    elif misfits or not cases or failed_measures or any(case.status is not Status.PASSED for case in cases.values()):
        status = Status.FAILED
    else:
        status = Status.PASSED
    return RunVerdict(status, reasons)


def _with_warnings(section: object) -> str:
    """A passed measure with warnings says so, so its line never reads as a clean pass beside the warning the
    annotation lists above it ("capacity: passed" under "capacity at SLO worse")."""
    count = len(result_sections.measure_warnings(section))
    if getattr(section, "status", None) is not Status.PASSED or not count:
        return ""
    return " with a warning" if count == 1 else f" with {count} warnings"
