"""The record of GSM8K in ``results.json``: a case's strict-match gate and each question's grade under its ``gsm8k``
key, every question with its prompt and completion in the side file ``gsm8k/<case>.jsonl`` (written by
``afd_e2e.phases.gsm8k``, the correctness phase's GSM8K half; shown by ``report/gsm8k_report.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from afd_e2e.results.status import Status

SECTION = "gsm8k"


@dataclass
class Gsm8kQuestion:
    """One question's grade: lm-eval's strict and flexible extractions against the gold answer."""

    index: int
    prompt_sha256: str
    extracted: str | None
    flexible: str | None
    gold: str | None
    correct: bool


@dataclass
class Gsm8kResult:
    """The ``gsm8k`` section of a case: strict-match correct answers against the profile's bar (``min_correct``),
    the flexible count beside it, and each question graded so far."""

    status: Status
    correct: int
    total: int
    min_correct: int
    accuracy_meaningful: bool
    flexible_correct: int
    records: str  # gsm8k/<case>.jsonl: every question with prompt and completion
    failure: str | None = None
    questions: list[Gsm8kQuestion] = field(default_factory=list)
