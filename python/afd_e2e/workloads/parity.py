"""Output parity: the same prompts, greedy, on each case of a comparison, compared token by token.

Token ids come from the server itself (``return_token_ids``), so two cases are compared on what the engine
generated, not on a re-tokenisation of the text.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from afd_e2e.profile import ParitySpec
from afd_e2e.results.model import ParityComparison, ParityOutput, ParityPrompt
from afd_e2e.results.status import Status
from afd_e2e.workloads.completions import CompletionError, complete


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
    """``parity_outputs`` of a case: one entry per prompt, in profile order, published as each arrives."""
    outputs: list[ParityOutput] = []
    for number, prompt in enumerate(spec.prompts, 1):
        if cancelled.is_set():
            break
        try:
            answer = complete(
                base_url, model, prompt, max_tokens=spec.max_tokens, return_token_ids=True, timeout_s=request_timeout_s
            )
        except CompletionError as exc:
            entry = ParityOutput(prompt, error=str(exc))
        else:
            entry = ParityOutput(prompt, text=answer.text, token_ids=list(answer.token_ids or ()))
        outputs.append(entry)
        publish(outputs)
        progress(f"parity: {number}/{len(spec.prompts)} prompts")
    return outputs


def first_difference(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token (the shorter length when one is a prefix of the other); None if equal."""
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def compare_outputs(
    spec: ParitySpec,
    baseline_id: str,
    baseline: list[ParityOutput] | None,
    candidate_id: str,
    candidate: list[ParityOutput] | None,
) -> ParityComparison:
    """The ``parity`` block of a comparison: share of prompts with identical token ids, first differing position."""
    result = ParityComparison(
        status=Status.SKIPPED,
        failure=None,
        identical=0,
        total=len(spec.prompts),
        share=None,
        min_share=spec.min_identical_share,
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
            result.prompts.append(ParityPrompt(prompt, identical=False))
            continue
        diff = first_difference(base.token_ids, cand.token_ids)
        result.prompts.append(ParityPrompt(prompt, identical=diff is None, first_diff_token=diff))
    result.identical = sum(p.identical for p in result.prompts)
    result.share = result.identical / len(spec.prompts)
    if errors:
        result.status, result.failure = Status.FAILED, f"{len(errors)} parity requests failed; {errors[0]}"
    elif result.share < spec.min_identical_share:
        result.status = Status.FAILED
        result.failure = f"{result.identical}/{len(spec.prompts)} identical, needs {spec.min_identical_share:.0%}"
    else:
        result.status = Status.PASSED
    return result
