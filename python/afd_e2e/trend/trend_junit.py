"""``trend/junit.xml``: one testcase per regression check, named by case and metric only (a stable name for Test
Engine's history), suite ``afd-e2e.<profile>.trend``.

A regression fails its testcase only when the profile says ``on_regression: fail``; with the default ``warn`` it
passes and says so in its output (the annotation carries the warning). Too little history is a skipped testcase.
"""

from __future__ import annotations

from pathlib import Path

from afd_e2e.report.escape import xml_text
from afd_e2e.report.junit import Testcase, testsuites_document
from afd_e2e.trend.analysis import NO_HISTORY, NO_VALUE, REGRESSION, Call
from afd_e2e.trend.compute import TrendReport
from afd_e2e.trend.section import value_text


def _line(report: TrendReport, row: Call) -> str:
    text = (
        f"{row.case_id} {row.metric.name}: tonight {value_text(row.tonight, row.metric.unit)} (mean of its "
        f"repetitions), window median {value_text(row.median, row.metric.unit)} over {row.history} runs: {row.status}"
    )
    if row.change_pct is not None:
        against = "the median before the change" if row.started is not None else "the window median"
        text += f" ({row.change_pct:+.1f}% against {against})"
    if row.started is not None:
        text += f" since {row.started.label}" + (f" {row.started.url}" if row.started.url else "")
    if row.detectable_pct is not None:
        text += f"; detectable step at this noise ±{row.detectable_pct:.1f}% within 3 nights"
    if row.status == REGRESSION and report.spec.on_regression != "fail":
        text += " [warning: the profile's on_regression is warn]"
    return text


def testcases(report: TrendReport) -> list[Testcase]:
    suite = xml_text(f"afd-e2e.{report.profile}.trend")
    cases = []
    for row in report.calls:
        line = xml_text(_line(report, row))
        outcome = None
        if row.status == REGRESSION and report.fails:
            outcome = "failure"
        elif row.status in (NO_HISTORY, NO_VALUE):
            outcome = "skipped"
        name = xml_text(f"{row.case_id} {row.metric.key}")
        cases.append(
            Testcase(
                suite, name, 0.0, outcome, message=line if outcome else "", output=line if outcome else "", stdout=line
            )
        )
    return cases


def write_trend_junit(report: TrendReport, path: Path) -> Path:
    document = testsuites_document(
        f"afd-e2e {report.profile} trend", testcases(report), {"source": report.source}, timestamp=None, hostname=None
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(document)
    return path
