"""What the reports show of the profiler phase (registered by ``phases/rendering.py``): a JUnit testcase per role's
trace (the phase's own failure where no role was checked); in the annotation's Features, one row per case and role
with its trace files, linked where uploaded; and the traces chosen for upload (newest first within the profile's
cap), which ``report/artifact_files.py`` uploads beside its globs.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

from afd_e2e.report.escape import markdown_text
from afd_e2e.report.junit import SuiteTestcases
from afd_e2e.report.section_renderers import AnnotationPart
from afd_e2e.report.status_icons import status_cell
from afd_e2e.results.model import CaseResults, RunResults
from afd_e2e.results.profiler_records import SECTION, ProfilerResult
from afd_e2e.results.status import Status

MIB = 1024 * 1024


def profiler_testcases(suite: SuiteTestcases, case: CaseResults) -> None:
    """Each role's trace a testcase; the phase's own failure when no role was checked."""
    profiler: ProfilerResult | None = case.section(SECTION)
    if profiler is None:
        return
    if not profiler.roles:
        suite.add("profiler", profiler.status, message=profiler.failure, output=suite.log_tail)
    for role in profiler.roles:
        suite.add(f"profiler trace {role.role}", role.status, message=role.detail)


def _link(path: str, text: str) -> str:
    return f'<a href="artifact://{quote(path, safe="/._-")}">{markdown_text(text)}</a>'


def _trace_files(profiler: ProfilerResult, role: str) -> list[str]:
    """A role's trace files: a link where uploaded, else the path and why it stayed on the agent."""
    return [
        _link(t.path, f"{t.path.rsplit('/', 1)[-1]} ({t.size_bytes / MIB:.1f} MiB)")
        if t.uploaded
        else f"{markdown_text(t.path)} (over the {profiler.upload_limit_mib} MiB upload cap, kept on the agent)"
        for t in profiler.traces
        if t.role == role
    ]


def _cell(status: Status | None, detail: str | None) -> str:
    return status_cell(status, markdown_text(detail, 160) if detail else "")


def profiler_tables(results: RunResults, plots: Mapping[str, str]) -> list[AnnotationPart]:
    rows = []
    for case_id, case in results.cases.items():
        profiler: ProfilerResult | None = case.section(SECTION)
        if profiler is None:
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
    if not rows:
        return []
    table = ["| Case | Role | Trace | Files |", "| --- | --- | --- | --- |", *rows]
    return [AnnotationPart("\n".join(table), group="Features")]


def uploaded_traces(case: CaseResults) -> list[str]:
    """The case's traces chosen for upload, by their paths in the results folder."""
    profiler: ProfilerResult | None = case.section(SECTION)
    return [t.path for t in profiler.traces if t.uploaded] if profiler else []
