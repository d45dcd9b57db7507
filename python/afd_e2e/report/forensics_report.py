"""The annotation's Forensics section: per case and capture, every process of the case by role, its state, CPU time
and where its busy thread is (the innermost frames py-spy read), linked to its whole dump."""

from __future__ import annotations

from collections.abc import Mapping

from afd_e2e.report.annotation import artifact_link
from afd_e2e.report.escape import markdown_text
from afd_e2e.report.section_renderers import AnnotationPart
from afd_e2e.results.model import ProcessDump, RunResults

FORENSICS_FRAMES = 3  # innermost frames of a process's busy thread quoted in the annotation


def _where(dump: ProcessDump) -> str:
    if dump.failure and not dump.mode:
        return f"not dumped: {markdown_text(dump.failure, 300)}"
    frames = dump.busy_frames[:FORENSICS_FRAMES]
    return " ← ".join(f"<code>{markdown_text(frame, 200)}</code>" for frame in frames) if frames else "no Python frame"


def _forensics(results: RunResults) -> str:
    """Per case and capture, every process by role: its state, CPU time and where its busy thread is."""
    blocks = []
    for case_id, case in results.cases.items():
        for taken in case.forensics:
            lines = [
                f"**{markdown_text(case.label)}** (<code>{markdown_text(case_id)}</code>): {markdown_text(taken.trigger)}: {markdown_text(taken.reason, 1000)} "
                f"({len(taken.processes)} processes, dumped in {taken.seconds:.2f} s)",
                "",
                "| Role | Process | State | CPU s | Where (innermost frames of the busy thread) | Dump |",
                "| --- | --- | --- | ---: | --- | --- |",
            ]
            lines += [
                f"| {markdown_text(d.role)} | {markdown_text(d.name)} pid {d.pid} | {markdown_text(d.status)} "
                f"| {d.cpu_s:.1f} | {_where(d)} | {artifact_link(d.path, d.mode or 'state') if d.path else ''} |"
                for d in taken.processes
            ]
            lines += [f"- NCCL flight recorder: {artifact_link(path)}" for path in taken.nccl_traces]
            blocks.append("\n".join(lines))
    return "### Forensics\n\n" + "\n\n".join(blocks) + "\n" if blocks else ""


def forensics_section(results: RunResults, plots: Mapping[str, str]) -> list[AnnotationPart]:
    return [AnnotationPart(_forensics(results), title="Forensics")]
