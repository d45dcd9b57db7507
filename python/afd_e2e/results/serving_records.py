"""The record of the serving checks in ``results.json``: what any OpenAI client relies on, asked of a case's API,
under the case's ``serving`` key (written by ``afd_e2e.phases.serving``, shown by ``report/serving_report.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from afd_e2e.results.model import CheckRecord
from afd_e2e.results.status import Status

SECTION = "serving"


@dataclass
class ServingResult:
    """The ``serving`` section of a case: each check with its detail (completion, usage, unknown_model,
    concurrent), and the failed ones in one line (``failure``)."""

    status: Status
    failure: str | None = None
    checks: list[CheckRecord] = field(default_factory=list)  # completion, usage, unknown_model, concurrent
