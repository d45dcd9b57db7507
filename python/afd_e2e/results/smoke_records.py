"""The record of a smoke in ``results.json``: the one greedy completion that proves the served model answers at
all, under the case's ``smoke`` key (written by ``afd_e2e.phases.smoke``, shown by ``report/smoke_report.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from afd_e2e.results.status import Status

SECTION = "smoke"


@dataclass
class SmokeResult:
    """The ``smoke`` section of a case: the prompt, its greedy completion and how many tokens it had in how long,
    or why there was none (``failure``)."""

    status: Status
    prompt: str
    completion: str | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    failure: str | None = None
