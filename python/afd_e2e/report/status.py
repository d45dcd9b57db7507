"""One reading of the results' status words for every report: passed, failed, warned, skipped or unfinished.

results.json uses ``running|passed|failed|cancelled|crashed|skipped`` for runs, cases and phases, and
``pass|fail|warn|skip|n/a`` for checks. A report shown after a crash or cancel still holds ``running`` entries:
those are work the run never finished.
"""

from __future__ import annotations

from enum import Enum


class Outcome(Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    ERROR = "error"  # crashed: the harness or engine broke, not a measured failure
    SKIP = "skip"  # skipped, cancelled or not applicable
    UNFINISHED = "unfinished"  # still "running" when results were last written


_OUTCOMES = {
    "passed": Outcome.PASS,
    "pass": Outcome.PASS,
    "warn": Outcome.WARN,
    "failed": Outcome.FAIL,
    "fail": Outcome.FAIL,
    "crashed": Outcome.ERROR,
    "cancelled": Outcome.SKIP,
    "skipped": Outcome.SKIP,
    "skip": Outcome.SKIP,
    "n/a": Outcome.SKIP,
    "running": Outcome.UNFINISHED,
}

ICONS = {
    Outcome.PASS: "✅",
    Outcome.WARN: "⚠️",
    Outcome.FAIL: "❌",
    Outcome.ERROR: "💥",
    Outcome.SKIP: "⏭️",
    Outcome.UNFINISHED: "⏳",
}


def outcome(status: str | None) -> Outcome:
    """Unknown or missing words count as unfinished: a report never turns an unknown state into a pass."""
    return _OUTCOMES.get(status or "running", Outcome.UNFINISHED)


def run_is_partial(results: dict) -> bool:
    """The run did not reach its verdict: it is still running, was cancelled, or crashed."""
    return results.get("status") in (None, "running", "cancelled", "crashed")
