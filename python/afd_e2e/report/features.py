"""The annotation's Features tables: replay parity per comparison, serving checks and profiler traces per case.

Each is its phase's annotation renderer (registered by ``afd_e2e.phases.rendering``); only what the run recorded appears.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

from afd_e2e.report.escape import markdown_text
from afd_e2e.report.section_renderers import AnnotationPart
from afd_e2e.report.status_icons import icon
from afd_e2e.results.model import ProfilerResult, RunResults
from afd_e2e.results.parity_text import parity_summary
from afd_e2e.results.status import Status

MIB = 1024 * 1024


def _cell(status: Status | None, detail: str | None = None) -> str:
    text = f"{icon(status)} {markdown_text(status or 'not started')}"
    return f"{text}: {markdown_text(detail, 160)}" if detail else text


def _link(path: str, text: str) -> str:
    return f'<a href="artifact://{quote(path, safe="/._-")}">{markdown_text(text)}</a>'


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


def serving_tables(results: RunResults, plots: Mapping[str, str]) -> list[AnnotationPart]:
    rows = [
        f"| <code>{markdown_text(case_id)}</code> | {markdown_text(check.check)} | {_cell(check.status, check.detail)} |"
        for case_id, case in results.cases.items()
        for check in (case.serving.checks if case.serving else [])
    ]
    return _table(["| Case | Serving check | Result |", "| --- | --- | --- |", *rows] if rows else [])


def _trace_files(profiler: ProfilerResult, role: str) -> list[str]:
    return [
        _link(t.path, f"{t.path.rsplit('/', 1)[-1]} ({t.size_bytes / MIB:.1f} MiB)")
        if t.uploaded
        else f"{markdown_text(t.path)} (over the {profiler.upload_limit_mib} MiB upload cap, kept on the agent)"
        for t in profiler.traces
        if t.role == role
    ]


def profiler_tables(results: RunResults, plots: Mapping[str, str]) -> list[AnnotationPart]:
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
    return _table(["| Case | Role | Trace | Files |", "| --- | --- | --- | --- |", *rows] if rows else [])
