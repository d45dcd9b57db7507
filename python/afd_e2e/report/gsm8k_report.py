"""What the reports show of GSM8K, the correctness phase's first half (registered by ``phases/rendering.py``): its
JUnit testcases (the strict-match gate, then one per question: a wrong answer fails only where the profile says
accuracy is meaningful), its column of the annotation's per-case table (correct answers against the bar, or why
none were scored) and each question's grade in its case's block of the annotation's Model output.
"""

from __future__ import annotations

from afd_e2e.report import formatting
from afd_e2e.report.escape import markdown_text
from afd_e2e.report.junit import SuiteTestcases
from afd_e2e.report.status_icons import icon, status_cell
from afd_e2e.results.gsm8k_records import SECTION, Gsm8kResult
from afd_e2e.results.model import CaseResults, RunResults
from afd_e2e.results.status import Status

PHASE = "correctness"  # the phase whose time the strict-match testcase shows


def gsm8k_testcases(suite: SuiteTestcases, case: CaseResults) -> None:
    """GSM8K's aggregate and one testcase per question (parity is judged in the comparisons)."""
    graded: Gsm8kResult | None = case.section(SECTION)
    if graded is None:
        return
    summary = (
        f"strict match {graded.correct}/{graded.total} (at least {graded.min_correct} needed), "
        f"flexible {graded.flexible_correct}"
    )
    suite.add(
        "gsm8k strict match",
        graded.status,
        message=graded.failure or summary,
        output=suite.log_tail,
        whole=suite.logs,
        stdout=summary,
        elapsed=case.timings.phases.get(PHASE),
    )
    for question in graded.questions:
        answer = f"extracted {question.extracted!r}, gold {question.gold!r}"
        if question.correct:
            status, note = Status.PASSED, answer
        elif graded.accuracy_meaningful:
            status, note = Status.FAILED, answer
        else:
            status, note = Status.PASSED, f"incorrect, not counted (accuracy not meaningful for this profile): {answer}"
        suite.add(f"gsm8k question {question.index}", status, message=answer, stdout=note)


def gsm8k_cell(results: RunResults, case_id: str, case: CaseResults) -> str:
    graded: Gsm8kResult | None = case.section(SECTION)
    if graded is None:
        return formatting.MISSING
    if graded.status in (Status.SKIPPED, Status.RUNNING, Status.CANCELLED, Status.CRASHED) and not graded.questions:
        return status_cell(graded.status, markdown_text(graded.failure or "", 120))  # never scored: say why
    cell = f"{icon(graded.status)} {graded.correct}/{graded.total}"
    if not graded.accuracy_meaningful:
        cell += " (not meaningful)"
    elif graded.status is Status.FAILED:
        cell += f" (at least {graded.min_correct} needed)"
    if graded.failure and graded.status is not Status.PASSED:
        cell += f": {markdown_text(graded.failure, 120)}"
    return cell


def gsm8k_output(case: CaseResults) -> list[str]:
    """Each question's extracted, flexible and gold answers; a value cut short points at the side file."""
    graded: Gsm8kResult | None = case.section(SECTION)
    if graded is None or not graded.questions:
        return []
    records = graded.records
    return [
        "| GSM8K question | Extracted | Flexible | Gold | Strict match |",
        "| ---: | --- | --- | --- | --- |",
        *(
            f"| {q.index} | {markdown_text(q.extracted, 80, records)} | {markdown_text(q.flexible, 80, records)} "
            f"| {markdown_text(q.gold, 80, records)} | {'✅' if q.correct else '❌'} |"
            for q in graded.questions
        ),
    ]
