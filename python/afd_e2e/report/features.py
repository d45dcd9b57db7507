"""The annotation's feature section: graph replay parity per comparison, serving checks and profiler traces per case.

Only what the run recorded appears; a run without these phases renders nothing here.
"""

from __future__ import annotations

from urllib.parse import quote

from afd_e2e.report.escape import markdown_text
from afd_e2e.report.status import ICONS, outcome

MIB = 1024 * 1024


def _cell(status: str | None, detail: str = "") -> str:
    text = f"{ICONS[outcome(status)]} {markdown_text(status or 'not started')}"
    return f"{text}: {markdown_text(detail, 160)}" if detail else text


def _link(path: str, text: str) -> str:
    return f'<a href="artifact://{quote(path, safe="/._-")}">{markdown_text(text)}</a>'


def _replay_rows(results: dict) -> list[str]:
    rows = []
    for comparison_id, comparison in (results.get("comparisons") or {}).items():
        replay = comparison.get("replay")
        if not replay:
            continue
        detail = replay.get("failure") or f"{replay.get('identical')}/{replay.get('total')} replayed requests identical"
        who = f"{comparison.get('baseline_label')} vs {comparison.get('candidate_label')}"
        rows.append(
            f"| <code>{markdown_text(comparison_id)}</code> | {markdown_text(who)} | {_cell(replay.get('status'), detail)} |"
        )
    return (
        ["| Comparison | Cases | Replay parity (rounds at the capture batch) |", "| --- | --- | --- |", *rows]
        if rows
        else []
    )


def _serving_rows(results: dict) -> list[str]:
    rows = []
    for case_id, case in (results.get("cases") or {}).items():
        for check in (case.get("serving") or {}).get("checks") or []:
            rows.append(
                f"| <code>{markdown_text(case_id)}</code> | {markdown_text(check.get('check'))} | "
                f"{_cell(check.get('status'), check.get('detail') or '')} |"
            )
    return ["| Case | Serving check | Result |", "| --- | --- | --- |", *rows] if rows else []


def _profiler_rows(results: dict) -> list[str]:
    rows = []
    for case_id, case in (results.get("cases") or {}).items():
        profiler = case.get("profiler")
        if not profiler:
            continue
        traces = profiler.get("traces") or []
        for role in profiler.get("roles") or [
            {"role": "-", "status": profiler.get("status"), "detail": profiler.get("failure")}
        ]:
            links = [
                _link(t["path"], f"{t['path'].rsplit('/', 1)[-1]} ({t['size_bytes'] / MIB:.1f} MiB)")
                if t.get("uploaded")
                else f"{markdown_text(t['path'])} (over the {profiler.get('upload_limit_mib')} MiB upload cap, kept on the agent)"
                for t in traces
                if t.get("role") == role.get("role")
            ]
            rows.append(
                f"| <code>{markdown_text(case_id)}</code> | {markdown_text(role.get('role'))} | "
                f"{_cell(role.get('status'), '' if links else role.get('detail') or '')} | {'<br>'.join(links) or '-'} |"
            )
    return ["| Case | Role | Trace | Files |", "| --- | --- | --- | --- |", *rows] if rows else []


def features_section(results: dict) -> str:
    """Markdown for the annotation, '' when the run has no replay, serving or profiler results."""
    parts = [table for table in (_replay_rows(results), _serving_rows(results), _profiler_rows(results)) if table]
    if not parts:
        return ""
    return "### Features\n\n" + "\n\n".join("\n".join(table) for table in parts) + "\n"
