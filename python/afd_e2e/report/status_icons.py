"""How a status looks in a report: one icon per ``Status``, and a status as a cell of the annotation's tables. A
report shown after a crash, cancel or lost runner still holds ``running`` entries: those are work the run never
finished."""

from __future__ import annotations

from afd_e2e.report.escape import markdown_text
from afd_e2e.results.status import Status

ICONS = {
    Status.PASSED: "✅",
    Status.WARNED: "⚠️",
    Status.FAILED: "❌",
    Status.CRASHED: "💥",
    Status.SKIPPED: "⏭️",
    Status.CANCELLED: "⏭️",
    Status.RUNNING: "⏳",
    Status.INTERRUPTED: "⏳",
}


def icon(status: Status | None) -> str:
    return ICONS[status or Status.RUNNING]


def status_cell(status: Status | None, detail: str = "") -> str:
    """The icon and the status in words (``not started`` for none), then ``detail`` (markdown) where given."""
    text = f"{icon(status)} {markdown_text(status or 'not started')}"
    return f"{text}: {detail}" if detail else text
