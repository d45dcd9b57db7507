"""The records of the replay phase in ``results.json``: a case's rounds under its ``replay`` key, every request of
them in the side file ``replay/<case>.jsonl``, and, under a comparison's ``replay`` key, the parity rule over every
paired request (parity's own record, ``ParityComparison``). Written by ``afd_e2e.phases.replay``, shown by
``report/replay_report.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from afd_e2e.results.parity_records import ParityOutput
from afd_e2e.results.status import Status

SECTION = "replay"  # the case's section and the comparison's, each under this key


@dataclass
class ReplayRequest:
    """One request of a replay round, collected as a parity output."""

    round: int
    index: int  # position in the round's batch
    output: ParityOutput


@dataclass
class ReplayResult:
    """Rounds of ``batch`` concurrent requests (the parity prompts, cycled): what a captured graph replays.

    Every request (its output with token ids and top-k logprobs: about 2.5 KB each) is in the side file ``records``,
    ``replay/<case>.jsonl``, one ``ReplayRequest`` a line; results written before the side file hold them inline in
    ``requests`` (``phases.replay.read_requests`` reads either)."""

    status: Status
    failure: str | None
    rounds: int
    batch: int
    answered: int = 0
    requests: list[ReplayRequest] = field(default_factory=list)  # only in results written before ``records``
    records: str | None = None  # replay/<case>.jsonl
