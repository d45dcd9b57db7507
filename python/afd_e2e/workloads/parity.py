"""Output parity: the same prompts, greedy, on each case of a comparison, compared token by token.

Token ids and their top-k logprobs come from the server itself (``return_token_ids``, ``logprobs: k`` named by
token id), so two cases are compared on what the engine generated, not on a re-tokenisation of the text.

Per prompt the verdict is ``identical`` (same token ids), ``close`` (at the first differing position each side's
token is within the other side's top-k: a near-tie that numeric noise ordered differently, as vLLM's own
``check_logprobs_close`` accepts; the comparison stops there, since the continuations diverge) or ``different``.
In ``exact`` mode only ``identical`` passes. Every prompt must pass for the parity gate to pass.

Profile keys (docs/reference.md): ``workloads.parity.prompts``, ``max_tokens``, ``mode`` (``logprobs``, the
default, or ``exact``) and ``top_logprobs`` (default 5, at most vLLM's default ``--max-logprobs``), read by
``read_parity``, which the correctness phase registers (``phases/correctness.py``: it collects each case's outputs
and registers the ``parity`` measure). This module, the section's type and the rule, sits in the workloads layer,
below the phases, because a bisect on ``--metric parity`` (``bisect/verdicts.py``) judges by the same rule and the
replay phase sends the same prompts; each reads the section through ``parity_spec``. Its records are
``results/parity_records.py``'s.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from afd_e2e.profile import Profile
from afd_e2e.profile.reader import Reader
from afd_e2e.results.model import CaseResults
from afd_e2e.results.parity_records import (
    OUTPUTS,
    RECORDS,
    ParityComparison,
    ParityOutput,
    ParityPrompt,
    ParitySide,
)
from afd_e2e.results.parity_text import describe_prompt
from afd_e2e.results.side_files import read_records
from afd_e2e.results.status import ParityVerdict, Status
from afd_e2e.workloads.completions import CompletionError, complete, token_texts

NAME = "parity"
MODES = ("logprobs", "exact")  # closeness as vLLM's check_logprobs_close, or identical token ids
MAX_TOP_LOGPROBS = 20  # vLLM's default --max-logprobs


@dataclass(frozen=True)
class ParitySpec:
    """``workloads.parity``: greedy outputs of the same prompts on two cases. ``mode`` logprobs: a prompt passes
    when its tokens are identical, or when at the first differing position each side's token is within the other's
    ``top_logprobs``; exact: only identical token ids pass. Every prompt must pass."""

    prompts: tuple[str, ...]
    max_tokens: int
    mode: str
    top_logprobs: int


def read_parity(r: Reader, profile: Profile) -> ParitySpec:
    """The section, refused where its mode is unknown or it asks more logprobs than vLLM returns by default."""
    spec = ParitySpec(
        prompts=r.str_list("prompts"),
        max_tokens=r.positive_int("max_tokens"),
        mode=r.get("mode", str, "logprobs"),
        top_logprobs=r.positive_int("top_logprobs", 5),
    )
    if spec.mode not in MODES:
        r.fail(r.key("mode"), f"unknown parity mode {spec.mode!r}", f"use one of: {', '.join(MODES)}")
    if spec.top_logprobs > MAX_TOP_LOGPROBS:
        r.fail(
            r.key("top_logprobs"),
            f"{spec.top_logprobs} is above vLLM's default --max-logprobs {MAX_TOP_LOGPROBS}",
            f"use at most {MAX_TOP_LOGPROBS}",
        )
    r.done()
    return spec


def parity_spec(profile: Profile) -> ParitySpec | None:
    """The profile's ``workloads.parity``, or None where it has none: the one accessor of the prompts and the rule
    (the correctness phase and its measure, the replay phase and its measure, a bisect on parity)."""
    return profile.workloads.get(NAME)


def collect_outputs(
    spec: ParitySpec,
    *,
    base_url: str,
    model: str,
    publish: Callable[[list[ParityOutput]], None],
    progress: Callable[[str], None],
    cancelled: threading.Event,
    request_timeout_s: float,
) -> list[ParityOutput]:
    """A case's parity outputs: one entry per prompt, in profile order, published as each arrives."""
    outputs: list[ParityOutput] = []
    for number, prompt in enumerate(spec.prompts, 1):
        if cancelled.is_set():
            break
        try:
            answer = complete(
                base_url,
                model,
                prompt,
                max_tokens=spec.max_tokens,
                return_token_ids=True,
                top_logprobs=spec.top_logprobs,
                timeout_s=request_timeout_s,
            )
        except CompletionError as exc:
            entry = ParityOutput(prompt, error=str(exc))
        else:
            entry = ParityOutput(
                prompt,
                text=answer.text,
                token_ids=list(answer.token_ids or ()),
                top_logprobs=[{str(token): lp for token, lp in top.items()} for top in answer.top_logprobs or ()],
            )
            try:
                entry.token_texts = token_texts(base_url, model, entry.token_ids or [], timeout_s=request_timeout_s)
            except CompletionError as exc:  # only the display loses the token texts, not the comparison
                progress(f"parity: token texts unavailable ({exc})")
        outputs.append(entry)
        publish(outputs)
        progress(f"parity: {number}/{len(spec.prompts)} prompts")
    return outputs


def parity_records_path(case_id: str) -> str:
    """Where a case's parity outputs go, relative to the results folder."""
    return f"parity/{case_id}.jsonl"


def read_outputs(out_dir: Path, case: CaseResults) -> list[ParityOutput] | None:
    """A case's parity outputs: from its side file, or inline in results written before it; None if it has none."""
    records: str | None = case.section(RECORDS)
    return case.section(OUTPUTS) if records is None else read_records(out_dir, records, ParityOutput)


def first_difference(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token (the shorter length when one is a prefix of the other); None if equal."""
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _top_k(output: ParityOutput, position: int, k: int) -> dict[int, float] | None:
    """The k most likely tokens the side recorded at ``position`` (vLLM adds the chosen token as a k+1-th)."""
    tops = output.top_logprobs or []
    if position >= len(tops):
        return None
    ranked = sorted(((int(token), lp) for token, lp in tops[position].items()), key=lambda t: -t[1])
    return dict(ranked[:k])


def _side(output: ParityOutput, position: int, other_token: int | None, k: int) -> ParitySide:
    token_ids, texts = output.token_ids or [], output.token_texts or []
    token = token_ids[position] if position < len(token_ids) else None
    top = _top_k(output, position, k)
    return ParitySide(
        token_id=token,
        text=texts[position] if token is not None and position < len(texts) else None,
        logprob=None if top is None or token is None else top.get(token),
        other_logprob=None if top is None or other_token is None else top.get(other_token),
        other_in_top_k=top is not None and other_token is not None and other_token in top,
    )


def compare_prompt(prompt: str, baseline: ParityOutput, candidate: ParityOutput, *, mode: str, k: int) -> ParityPrompt:
    """One prompt's verdict: identical, close (logprobs mode, each token in the other's top-k) or different."""
    base_ids, cand_ids = baseline.token_ids or [], candidate.token_ids or []
    position = first_difference(base_ids, cand_ids)
    if position is None:
        return ParityPrompt(prompt, identical=True, verdict=ParityVerdict.IDENTICAL)
    base_token = base_ids[position] if position < len(base_ids) else None
    cand_token = cand_ids[position] if position < len(cand_ids) else None
    base_side = _side(baseline, position, cand_token, k)
    cand_side = _side(candidate, position, base_token, k)
    close = mode == "logprobs" and base_side.other_in_top_k and cand_side.other_in_top_k
    return ParityPrompt(
        prompt,
        identical=False,
        first_diff_token=position,
        verdict=ParityVerdict.CLOSE if close else ParityVerdict.DIFFERENT,
        baseline=base_side,
        candidate=cand_side,
    )


def compare_outputs(
    spec: ParitySpec,
    baseline_id: str,
    baseline: list[ParityOutput] | None,
    candidate_id: str,
    candidate: list[ParityOutput] | None,
) -> ParityComparison:
    """The ``parity`` block of a comparison: per prompt identical / close / different, and the gate."""
    result = ParityComparison(
        status=Status.SKIPPED,
        failure=None,
        identical=0,
        total=len(spec.prompts),
        share=None,
        mode=spec.mode,
        top_logprobs=spec.top_logprobs,
    )
    if not spec.prompts:
        result.failure = "the profile lists no parity prompts"
        return result
    for case_id, outputs in ((baseline_id, baseline), (candidate_id, candidate)):
        if not outputs:
            result.failure = f"case {case_id} recorded no parity outputs"
            return result
    by_prompt = [{o.prompt: o for o in outputs or ()} for outputs in (baseline, candidate)]
    errors = []
    for prompt in spec.prompts:
        sides = [side.get(prompt) for side in by_prompt]
        for case_id, side in zip((baseline_id, candidate_id), sides, strict=True):
            if side is None or side.error:
                errors.append(f"{case_id}: {side.error if side else 'prompt not run'}")
        base, cand = sides
        if base is None or cand is None or base.token_ids is None or cand.token_ids is None:
            result.prompts.append(ParityPrompt(prompt, identical=False, verdict=ParityVerdict.NOT_COMPARED))
            continue
        result.prompts.append(compare_prompt(prompt, base, cand, mode=spec.mode, k=spec.top_logprobs))
    verdicts = [p.verdict for p in result.prompts]
    result.identical = verdicts.count(ParityVerdict.IDENTICAL)
    result.close = verdicts.count(ParityVerdict.CLOSE)
    result.different = verdicts.count(ParityVerdict.DIFFERENT)
    result.share = result.identical / len(spec.prompts)
    different = [p for p in result.prompts if p.verdict is ParityVerdict.DIFFERENT]
    if errors:
        result.status, result.failure = Status.FAILED, f"{len(errors)} parity requests failed; {errors[0]}"
    elif different:
        beyond = "differ" if spec.mode == "exact" else f"differ beyond the top-{spec.top_logprobs} logprobs"
        first = describe_prompt(different[0], baseline_id, candidate_id)
        result.status, result.failure = Status.FAILED, f"{len(different)}/{len(spec.prompts)} prompts {beyond}; {first}"
    else:
        result.status = Status.PASSED
    return result
