"""The records of output parity in ``results.json``: a case's greedy outputs of the parity prompts, in the side file
``parity/<case>.jsonl`` its ``parity_records`` key names (one ``ParityOutput`` a line; results written before the
side file hold them inline under ``parity_outputs``), and, under a comparison's ``parity`` key, the two cases'
outputs compared prompt by prompt (``ParityComparison``). Written by ``afd_e2e.phases.correctness`` through
``workloads/parity.py``'s collection and rule, shown by ``report/parity_report.py``. The rule and these records are
also the replay phase's (its requests are parity outputs, its comparison a ``ParityComparison``) and a bisect's on
``--metric parity``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from afd_e2e.results.status import ParityVerdict, Status

RECORDS = "parity_records"  # the case's section: the path of its side file
OUTPUTS = "parity_outputs"  # the case's section in results written before the side file: the outputs inline
SECTION = "parity"  # the comparison's section, filled by the measure of the same name


@dataclass
class ParityOutput:
    """One greedy completion of a parity prompt, token ids as the server returned them; ``top_logprobs`` per
    generated token: its top-k tokens and the chosen one, token id (as a string) -> logprob; ``token_texts``: each
    token's own text from the server's tokenizer (for showing where outputs part)."""

    prompt: str
    text: str | None = None
    token_ids: list[int] | None = None
    error: str | None = None
    top_logprobs: list[dict[str, float]] | None = None
    token_texts: list[str] | None = None


@dataclass
class ParitySide:
    """One side at the first differing token: its token (None: its output ended), the text that token added, its
    logprob, the logprob it gave the other side's token (None: not in its top-k)."""

    token_id: int | None
    text: str | None
    logprob: float | None
    other_logprob: float | None
    other_in_top_k: bool


@dataclass
class ParityPrompt:
    """One prompt's parity. ``verdict`` is None in results written before logprobs parity (read ``identical``)."""

    prompt: str
    identical: bool
    first_diff_token: int | None = None
    verdict: ParityVerdict | None = None
    baseline: ParitySide | None = None
    candidate: ParitySide | None = None

    @property
    def outcome(self) -> ParityVerdict:
        """The prompt's verdict; results written before logprobs parity held only ``identical``/``first_diff_token``."""
        if self.verdict is not None:
            return self.verdict
        if self.identical:
            return ParityVerdict.IDENTICAL
        return ParityVerdict.DIFFERENT if self.first_diff_token is not None else ParityVerdict.NOT_COMPARED


@dataclass
class ParityComparison:
    """``mode`` logprobs: a prompt passes identical or close (top-``top_logprobs``); exact: identical only. Every
    prompt must pass. ``min_share`` is only in results written before logprobs parity."""

    status: Status
    failure: str | None
    identical: int
    total: int
    share: float | None
    min_share: float | None = None
    prompts: list[ParityPrompt] = field(default_factory=list)
    mode: str | None = None
    top_logprobs: int | None = None
    close: int = 0
    different: int = 0
