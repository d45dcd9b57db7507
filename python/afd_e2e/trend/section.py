"""The annotation section "Trend over the last N runs": a compact table (one row per case and metric, ▲▼ for the
direction of a move, the build that started it linked), links to the trend plots, and the skipped builds counted
by reason. Bounded in size whatever the history holds: rows grow with metrics, not with runs, and at most
``MAX_SKIPS_LISTED`` skipped builds are named.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Mapping

from afd_e2e.report.annotation import artifact_link
from afd_e2e.report.escape import markdown_text
from afd_e2e.trend.analysis import IMPROVEMENT, NO_HISTORY, NO_VALUE, REGRESSION, Call
from afd_e2e.trend.compute import TrendReport
from afd_e2e.trend.record import BuildRef

MAX_SKIPS_LISTED = 20
_CALL_TEXT = {
    REGRESSION: "⚠️ regression",
    IMPROVEMENT: "improvement",
    NO_HISTORY: "too little history",
    NO_VALUE: "no value tonight",
}


def build_link(build: BuildRef | None) -> str:
    if build is None:
        return ""
    text = markdown_text(build.label)
    if build.url and build.url.startswith(("https://", "http://")):
        return f'<a href="{html.escape(build.url, quote=True)}">{text}</a>'
    return text


def value_text(value: float | None, unit: str) -> str:
    if value is None:
        return "–"
    if unit == "share":
        return f"{value * 100:.1f}%"
    magnitude = abs(value)
    digits = 0 if magnitude >= 1000 else 1 if magnitude >= 100 else 2 if magnitude >= 1 else 3
    return f"{value:,.{digits}f} {unit}"


def _change(row: Call) -> str:
    if row.change_pct is None:
        return "–"
    arrow = "▲" if row.change_pct > 0 else "▼" if row.change_pct < 0 else ""
    return f"{arrow} {row.change_pct:+.1f}%".strip()


def _row(row: Call, labels: Mapping[str, str]) -> str:
    history = (
        f"{value_text(row.median, row.metric.unit)} ± {value_text(row.spread, row.metric.unit)}"
        if row.median is not None
        else "–"
    )
    call_text = _CALL_TEXT.get(row.status, row.status)
    if row.started is not None and row.moved_nights > 1:
        call_text += f" ({row.moved_nights} nights)"
    cells = [
        markdown_text(labels.get(row.case_id, row.case_id)),
        markdown_text(row.metric.name),
        history,
        value_text(row.tonight, row.metric.unit),
        _change(row),
        "–" if row.detectable_pct is None else f"±{row.detectable_pct:.1f}%",
        call_text,
        build_link(row.started),
    ]
    return "<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"


def _skips(report: TrendReport) -> list[str]:
    if not report.skipped:
        return ["<p>No earlier build was skipped.</p>"]
    counts = Counter(skip.kind for skip in report.skipped)
    summary = ", ".join(f"{count} {kind}" for kind, count in counts.most_common())
    builds = f"{len(report.skipped)} earlier build{'s' if len(report.skipped) != 1 else ''}"
    lines = [f"<details><summary>{builds} skipped: {markdown_text(summary)}</summary>", ""]
    lines += [f"- {build_link(s.build)}: {markdown_text(s.reason)}" for s in report.skipped[:MAX_SKIPS_LISTED]]
    if len(report.skipped) > MAX_SKIPS_LISTED:
        lines.append(f"- … and {len(report.skipped) - MAX_SKIPS_LISTED} more (see trend/trend.json)")
    return [*lines, "", "</details>"]


def _commit(build: BuildRef) -> str:
    return f" (commit <code>{markdown_text(build.commit[:12])}</code>)" if build.commit else ""


def _episodes(report: TrendReport) -> list[str]:
    """One line per open regression episode: since when, the last good and first bad builds and their commits."""
    if not report.open_episodes:
        return []
    lines = ["**Open regression episodes** (one alert each, however many nights they last):", ""]
    for episode in report.open_episodes:
        started = "opened tonight" if episode in report.opened_tonight else f"open for {episode.nights} nights"
        lines.append(
            f"- {markdown_text(episode.metric.name)} of <code>{markdown_text(episode.case_id)}</code>: "
            f"worst night {episode.worst_pct:+.1f}% against the median before it "
            f"({value_text(episode.median, episode.metric.unit)}), "
            f"{started}; last good {build_link(episode.last_good)}{_commit(episode.last_good)}, first bad "
            f"{build_link(episode.first_bad)}{_commit(episode.first_bad)}"
        )
    return [*lines, ""]


def render_section(report: TrendReport, plots: Mapping[str, str]) -> str:
    """The section's markdown; ``plots`` maps comparison id -> plot path relative to the results folder."""
    labels: dict[str, str] = {}
    for comparison in report.comparisons:
        labels[comparison.baseline] = comparison.baseline_label
        labels[comparison.candidate] = comparison.candidate_label
    spec = report.spec
    regressions = report.regressions
    runs = len(report.history)
    if report.nothing_judged:
        verdict = f"**nothing judged**: {markdown_text(report.nothing_judged)}"
    elif regressions:
        verdict = f"**{len(regressions)} regression{'s' if len(regressions) != 1 else ''}**" + (
            " (the profile fails the job on a regression)" if spec.on_regression == "fail" else " (warning)"
        )
    else:
        verdict = "no regression"
    lines = [
        f"### Trend over the last {runs} run{'s' if runs != 1 else ''}",
        "",
        f"{verdict}. Tonight ({build_link(report.tonight.build)}) against {runs} earlier run{'s' if runs != 1 else ''} from "
        f"{markdown_text(report.source)}: profile <code>{markdown_text(report.identity.profile)}</code> revision "
        f"<code>{markdown_text(report.identity.revision)}</code> on {markdown_text(report.identity.hardware)}. "
        "A change is called when the last 2 or 3 nights, tonight included, moved together: a robust z-test of "
        "their mean against the median and robust spread of the nights before them, every one of them on the same "
        f"side, by at least {spec.threshold_pct:g}% (one night alone, however far, is no change). The build named "
        "is the first of the nights that moved, and the change is tonight (the mean of its repetitions) against the "
        "median before that build (the whole window's when nothing moved), so it can differ from tonight against "
        "the window median shown. <i>Detectable</i>: the smallest step this series' noise lets the rule flag "
        "within 3 nights, 4 times in 5.",
        "",
        "<table><tr><th>case</th><th>metric</th><th>window median ± spread</th>"
        "<th>tonight (mean of its repetitions)</th><th>change against the median before the change</th>"
        "<th>detectable</th><th>call</th><th>since</th></tr>",
        *(_row(row, labels) for row in report.calls),
        "</table>",
        "",
        *_episodes(report),
    ]
    if plots:
        links = ", ".join(artifact_link(path, f"{comparison_id} trend") for comparison_id, path in plots.items())
        lines += [f"Trend plots: {links}", ""]
    return "\n".join([*lines, *_skips(report), ""])
