"""Parity in words: one line per prompt's verdict and the counts a reader needs first (JUnit, the annotation, and
a failed comparison's own failure line)."""

from __future__ import annotations

from afd_e2e.results.parity_records import ParityComparison, ParityPrompt, ParitySide
from afd_e2e.results.status import ParityVerdict


def _token_text(side: ParitySide) -> str:
    if side.token_id is None:
        return "ended"
    logprob = "not in its top-k" if side.logprob is None else f"{side.logprob:.4f}"
    other = "" if side.other_logprob is None else f", the other's {side.other_logprob:.4f}"
    return f"{side.token_id} {side.text!r} ({logprob}{other})"


def describe_prompt(prompt: ParityPrompt, baseline_id: str, candidate_id: str) -> str:
    """One line for a prompt's verdict: where the outputs part and both tokens with their logprobs."""
    verdict = prompt.outcome
    if verdict in (ParityVerdict.IDENTICAL, ParityVerdict.NOT_COMPARED):
        return f"{verdict}: {prompt.prompt!r}"
    line = f"{verdict} at token {prompt.first_diff_token}: {prompt.prompt!r}"
    if prompt.baseline and prompt.candidate:
        line += f": {baseline_id} {_token_text(prompt.baseline)} vs {candidate_id} {_token_text(prompt.candidate)}"
    return line


def parity_summary(parity: ParityComparison) -> str:
    """``3/4 identical, 1 close (logprobs, top-5)``: the counts a reader needs first."""
    counts = [f"{parity.identical}/{parity.total} identical"]
    counts += [f"{count} {word}" for word, count in (("close", parity.close), ("different", parity.different)) if count]
    if parity.mode == "logprobs":
        return ", ".join(counts) + f" (logprobs, top-{parity.top_logprobs})"
    return ", ".join(counts) + (f" ({parity.mode})" if parity.mode else "")
