"""The run's verdict from its results (pure): the status and one line per case and comparison measure."""

from __future__ import annotations

from typing import Any

FAILING = ("fail", "failed", "crashed")


def decide_verdict(data: dict[str, Any], *, cancelled: str | None = None, crashed: str | None = None) -> dict[str, Any]:
    """``{status, reasons}``: passed only when every case passed and no comparison measure failed."""
    reasons: list[str] = []
    if cancelled:
        reasons.append(f"run {cancelled}")
    if crashed:
        reasons.append(f"harness crashed: {crashed}")
    cases = data.get("cases", {})
    if not cases:
        reasons.append("no case ran")
    for case_id, case in cases.items():
        line = f"{case_id} ({case.get('label', case.get('kind', ''))}): {case['status']}"
        reasons.append(line + (f": {case['failure']}" if case.get("failure") else ""))
        for section in ("smoke", "gsm8k", "performance"):
            part = case.get(section) or {}
            if part.get("status") == "skipped":
                reasons.append(f"{case_id} {section}: skipped ({part.get('failure') or 'not run'})")
    failed_measures = False
    for comparison_id, comparison in data.get("comparisons", {}).items():
        for measure in ("parity", "replay", "performance"):
            section = comparison.get(measure) or {}
            status = section.get("status")
            if not status:
                continue
            if section.get("control"):
                reasons.append(f"{comparison_id} {measure}: {status} (forced-routing control, not in the verdict)")
                continue
            reasons.append(f"{comparison_id} {measure}: {status}")
            failed_measures |= status in FAILING
    if cancelled:
        status = "cancelled"
    elif crashed or any(case["status"] == "crashed" for case in cases.values()):
        status = "crashed"
    elif not cases or failed_measures or any(case["status"] != "passed" for case in cases.values()):
        status = "failed"
    else:
        status = "passed"
    return {"status": status, "reasons": reasons}
