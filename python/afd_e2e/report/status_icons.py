"""How a status looks in a report: one icon per ``Status``. A report shown after a crash, cancel or lost runner
still holds ``running`` entries: those are work the run never finished."""

from __future__ import annotations

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
