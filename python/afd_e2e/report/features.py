"""The annotation's Features table of replay parity per comparison: the replay phase's annotation renderer
(registered by ``afd_e2e.phases.rendering``); only what the run recorded appears.
"""

from __future__ import annotations

from collections.abc import Mapping

from afd_e2e.report.escape import markdown_text
from afd_e2e.report.section_renderers import AnnotationPart
from afd_e2e.report.status_icons import icon
from afd_e2e.results.model import RunResults
from afd_e2e.results.parity_text import parity_summary
from afd_e2e.results.status import Status


def _cell(status: Status | None, detail: str | None = None) -> str:
    text = f"{icon(status)} {markdown_text(status or 'not started')}"
    return f"{text}: {markdown_text(detail, 160)}" if detail else text


def _table(rows: list[str]) -> list[AnnotationPart]:
    return [AnnotationPart("\n".join(rows), group="Features")] if rows else []


def replay_tables(results: RunResults, plots: Mapping[str, str]) -> list[AnnotationPart]:
    rows = []
    for comparison_id, comparison in results.comparisons.items():
        if (replay := comparison.replay) is None:
            continue
        detail = replay.failure or f"requests {parity_summary(replay)}"
        cases = f"{comparison.baseline_label} vs {comparison.candidate_label}"
        rows.append(
            f"| <code>{markdown_text(comparison_id)}</code> | {markdown_text(cases)} | {_cell(replay.status, detail)} |"
        )
    header = ["| Comparison | Cases | Replay parity (rounds at the capture batch) |", "| --- | --- | --- |"]
    return _table([*header, *rows] if rows else [])
