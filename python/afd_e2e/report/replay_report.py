"""What the reports show of the replay phase (registered by ``phases/rendering.py``): a JUnit testcase per case (its
requests answered) and per comparison (replay parity, naming each request that is not identical), and the
annotation's Features table of replay parity per comparison; only what the run recorded appears.
"""

from __future__ import annotations

from collections.abc import Mapping

from afd_e2e.report.escape import markdown_text
from afd_e2e.report.junit import SuiteTestcases
from afd_e2e.report.section_renderers import AnnotationPart
from afd_e2e.report.status_icons import status_cell
from afd_e2e.results.model import CaseResults, Comparison, RunResults
from afd_e2e.results.parity_records import ParityComparison
from afd_e2e.results.parity_text import describe_prompt, parity_summary
from afd_e2e.results.replay_records import SECTION, ReplayResult


def replay_testcases(suite: SuiteTestcases, case: CaseResults) -> None:
    replay: ReplayResult | None = case.section(SECTION)
    if replay:
        summary = f"{replay.answered} of {replay.rounds} x {replay.batch} requests answered"
        suite.add("replay", replay.status, message=replay.failure or summary, stdout=summary)


def replay_parity_testcases(suite: SuiteTestcases, comparison: Comparison, replay: ParityComparison) -> None:
    lines = "\n".join(describe_prompt(prompt, comparison.baseline, comparison.candidate) for prompt in replay.prompts)
    suite.add("replay parity", replay.status, message=replay.failure or parity_summary(replay), stdout=lines)


def replay_tables(results: RunResults, plots: Mapping[str, str]) -> list[AnnotationPart]:
    rows = []
    for comparison_id, comparison in results.comparisons.items():
        replay: ParityComparison | None = comparison.section(SECTION)
        if replay is None:
            continue
        detail = replay.failure or f"requests {parity_summary(replay)}"
        cases = f"{comparison.baseline_label} vs {comparison.candidate_label}"
        cell = status_cell(replay.status, markdown_text(detail, 160))
        rows.append(f"| <code>{markdown_text(comparison_id)}</code> | {markdown_text(cases)} | {cell} |")
    if not rows:
        return []
    table = ["| Comparison | Cases | Replay parity (rounds at the capture batch) |", "| --- | --- | --- |", *rows]
    return [AnnotationPart("\n".join(table), group="Features")]
