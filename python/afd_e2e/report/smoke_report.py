"""What the reports show of a smoke (registered by ``phases/rendering.py``): its JUnit testcase, with the prompt and
the completion as its output; its column of the annotation's per-case table (tokens and seconds, or why it failed);
and the prompt and completion in full in its case's block of the annotation's Model output.
"""

from __future__ import annotations

from afd_e2e.report import formatting
from afd_e2e.report.escape import markdown_text
from afd_e2e.report.junit import SuiteTestcases
from afd_e2e.report.status_icons import icon, status_cell
from afd_e2e.results.model import CaseResults, RunResults
from afd_e2e.results.smoke_records import SECTION, SmokeResult


def smoke_testcases(suite: SuiteTestcases, case: CaseResults) -> None:
    smoke: SmokeResult | None = case.section(SECTION)
    if smoke is not None:
        suite.add(
            "smoke",
            smoke.status,
            message=smoke.failure,
            output=suite.log_tail,
            whole=suite.logs,
            stdout=f"prompt: {smoke.prompt}\ncompletion: {smoke.completion}",
            elapsed=smoke.latency_s,
        )


def smoke_cell(results: RunResults, case_id: str, case: CaseResults) -> str:
    smoke: SmokeResult | None = case.section(SECTION)
    if smoke is None:
        return formatting.MISSING
    if smoke.failure:
        return status_cell(smoke.status, markdown_text(smoke.failure, 120))
    timing = f"{smoke.completion_tokens} tokens in {smoke.latency_s:.2f} s" if smoke.latency_s is not None else ""
    return f"{icon(smoke.status)} {timing}".rstrip()


def smoke_output(case: CaseResults) -> list[str]:
    smoke: SmokeResult | None = case.section(SECTION)
    if smoke is None or smoke.completion is None:
        return []
    return [
        f"Smoke prompt: {markdown_text(smoke.prompt, 500)}  ",
        f"Completion: {markdown_text(smoke.completion, 2000)}",
        "",
    ]
