"""What the reports show of output parity, the correctness phase's second half and its measure (registered by
``phases/rendering.py``): the comparison's JUnit testcase (naming each prompt's verdict), the Parity column of the
annotation's per-case table (each comparison the case is the candidate of) and, below that table, each comparison's
parity per prompt, where the outputs part and both tokens with their logprobs.
"""

from __future__ import annotations

from collections.abc import Mapping

from afd_e2e.report import formatting
from afd_e2e.report.escape import markdown_text
from afd_e2e.report.junit import SuiteTestcases
from afd_e2e.report.section_renderers import AnnotationPart
from afd_e2e.report.status_icons import icon, status_cell
from afd_e2e.results.model import CaseResults, Comparison, RunResults
from afd_e2e.results.parity_records import SECTION, ParityComparison, ParityPrompt, ParitySide
from afd_e2e.results.parity_text import describe_prompt, parity_summary
from afd_e2e.results.status import ParityVerdict, Status

_VERDICT_ICONS = {ParityVerdict.IDENTICAL: "✅", ParityVerdict.CLOSE: "🟰"}


def parity_testcases(suite: SuiteTestcases, comparison: Comparison, parity: ParityComparison) -> None:
    message = parity.failure or parity_summary(parity)
    lines = "\n".join(describe_prompt(prompt, comparison.baseline, comparison.candidate) for prompt in parity.prompts)
    suite.add("parity", parity.status, message=message, stdout=lines)


def parity_cell(results: RunResults, case_id: str, case: CaseResults) -> str:
    cells = []
    for comparison in results.comparisons.values():
        parity: ParityComparison | None = comparison.section(SECTION)
        if parity is None or comparison.candidate != case_id:
            continue
        if parity.status in (Status.PASSED, Status.FAILED):
            counts = [f"{parity.identical}/{parity.total} identical"]
            counts += [f"{n} {word}" for word, n in (("close", parity.close), ("different", parity.different)) if n]
            cells.append(f"{icon(parity.status)} {', '.join(counts)} vs {markdown_text(comparison.baseline_label)}")
        else:  # not compared: say why
            cells.append(status_cell(parity.status, markdown_text(parity.failure or "", 120)))
    return "; ".join(cells) or formatting.MISSING


def parity_details(results: RunResults, plots: Mapping[str, str]) -> list[AnnotationPart]:
    """The correctness phase's part of the per-case table's section: parity per prompt, per comparison."""
    parts = []
    for comparison_id, comparison in results.comparisons.items():
        parity: ParityComparison | None = comparison.section(SECTION)
        if parity is not None and parity.prompts:
            parts.append(AnnotationPart(_details(comparison_id, comparison, parity), group="Correctness"))
    return parts


def _token_cell(side: ParitySide | None) -> str:
    """``188 ' the'`` with its logprob and the logprob it gave the other side's token."""
    if side is None:
        return formatting.MISSING
    if side.token_id is None:
        return "ended"
    mine = "not in top-k" if side.logprob is None else f"{side.logprob:.4f}"
    other = "not in top-k" if side.other_logprob is None else f"{side.other_logprob:.4f}"
    return f"{side.token_id} <code>{markdown_text(repr(side.text), 40)}</code> ({mine}; other's {other})"


def _row(prompt: ParityPrompt) -> str:
    verdict = prompt.outcome
    position = formatting.MISSING if prompt.first_diff_token is None else str(prompt.first_diff_token)
    return (
        f"| {markdown_text(prompt.prompt, 120)} | {_VERDICT_ICONS.get(verdict, '❌')} {markdown_text(verdict)} "
        f"| {position} | {_token_cell(prompt.baseline)} | {_token_cell(prompt.candidate)} |"
    )


def _details(comparison_id: str, comparison: Comparison, parity: ParityComparison) -> str:
    """Per prompt: identical / close / different, where the outputs part and both tokens with their logprobs
    (each side's own and the one it gave the other side's token); open when the parity gate failed."""
    baseline, candidate = markdown_text(comparison.baseline_label), markdown_text(comparison.candidate_label)
    rows = [
        f"| Prompt | Parity | First differing token | {baseline} | {candidate} |",
        "| --- | --- | ---: | --- | --- |",
        *(_row(prompt) for prompt in parity.prompts),
    ]
    if parity.mode == "logprobs":
        rows += [
            "",
            f"Close: at the first differing token each side's token is within the other's top-{parity.top_logprobs} "
            "logprobs (a near-tie), as vLLM's own tests accept; exact mode would count it as different.",
        ]
    summary = f"Parity per prompt, <code>{markdown_text(comparison_id)}</code>: {status_cell(parity.status)}"
    opened = " open" if parity.status is Status.FAILED else ""
    return f"<details{opened}><summary>{summary}</summary>\n\n" + "\n".join(rows) + "\n\n</details>"
