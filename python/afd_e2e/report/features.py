"""The annotation's feature section: replay parity per comparison, serving checks and profiler traces per case.

Only what the run recorded appears; a run without these phases renders nothing here.
"""

from __future__ import annotations

from urllib.parse import quote

from afd_e2e.report.escape import markdown_text
from afd_e2e.report.status import icon
from afd_e2e.results.model import ProfilerResult, RunResults
from afd_e2e.results.status import Status
from afd_e2e.workloads.parity import parity_summary

MIB = 1024 * 1024


def _cell(status: Status | None, detail: str | None = None) -> str:
    text = f"{icon(status)} {markdown_text(status or 'not started')}"
    return f"{text}: {markdown_text(detail, 160)}" if detail else text


def _link(path: str, text: str) -> str:
    return f'<a href="artifact://{quote(path, safe="/._-")}">{markdown_text(text)}</a>'


def _replay_rows(results: RunResults) -> list[str]:
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
    return [*header, *rows] if rows else []


def _serving_rows(results: RunResults) -> list[str]:
    rows = [
        f"| <code>{markdown_text(case_id)}</code> | {markdown_text(check.check)} | {_cell(check.status, check.detail)} |"
        for case_id, case in results.cases.items()
        for check in (case.serving.checks if case.serving else [])
    ]
    return ["| Case | Serving check | Result |", "| --- | --- | --- |", *rows] if rows else []


def _trace_files(profiler: ProfilerResult, role: str) -> list[str]:
    return [
        _link(t.path, f"{t.path.rsplit('/', 1)[-1]} ({t.size_bytes / MIB:.1f} MiB)")
        if t.uploaded
        else f"{markdown_text(t.path)} (over the {profiler.upload_limit_mib} MiB upload cap, kept on the agent)"
        for t in profiler.traces
        if t.role == role
    ]


def _profiler_rows(results: RunResults) -> list[str]:
    rows = []
    for case_id, case in results.cases.items():
        if (profiler := case.profiler) is None:
            continue
        if not profiler.roles:
            rows.append(
                f"| <code>{markdown_text(case_id)}</code> | - | {_cell(profiler.status, profiler.failure)} | - |"
            )
        for role in profiler.roles:
            files = _trace_files(profiler, role.role)
            rows.append(
                f"| <code>{markdown_text(case_id)}</code> | {markdown_text(role.role)} | "
                f"{_cell(role.status, None if files else role.detail)} | {'<br>'.join(files) or '-'} |"
            )
    return ["| Case | Role | Trace | Files |", "| --- | --- | --- | --- |", *rows] if rows else []


def features_section(results: RunResults) -> str:
    """Markdown for the annotation, '' when the run has no replay, serving or profiler results."""
    tables = [table for table in (_replay_rows(results), _serving_rows(results), _profiler_rows(results)) if table]
    if not tables:
        return ""
    return "### Features\n\n" + "\n\n".join("\n".join(table) for table in tables) + "\n"
