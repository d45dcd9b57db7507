"""What the reports show of the serving checks (registered by ``phases/rendering.py``): a JUnit testcase per check
(``serving completion``, ``serving usage``, ...) and, in the annotation's Features, one row per case and check.
"""

from __future__ import annotations

from collections.abc import Mapping

from afd_e2e.report.escape import markdown_text
from afd_e2e.report.junit import SuiteTestcases
from afd_e2e.report.section_renderers import AnnotationPart
from afd_e2e.report.status_icons import status_cell
from afd_e2e.results.model import CaseResults, RunResults
from afd_e2e.results.serving_records import SECTION, ServingResult


def serving_testcases(suite: SuiteTestcases, case: CaseResults) -> None:
    serving: ServingResult | None = case.section(SECTION)
    for check in serving.checks if serving else []:
        suite.add(f"serving {check.check}", check.status, message=check.detail)


def serving_tables(results: RunResults, plots: Mapping[str, str]) -> list[AnnotationPart]:
    rows = []
    for case_id, case in results.cases.items():
        serving: ServingResult | None = case.section(SECTION)
        rows += [
            f"| <code>{markdown_text(case_id)}</code> | {markdown_text(check.check)} "
            f"| {status_cell(check.status, markdown_text(check.detail, 160))} |"
            for check in (serving.checks if serving else [])
        ]
    if not rows:
        return []
    table = ["| Case | Serving check | Result |", "| --- | --- | --- |", *rows]
    return [AnnotationPart("\n".join(table), group="Features")]
