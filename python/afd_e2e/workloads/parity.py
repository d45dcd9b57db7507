"""Output parity: the same prompts, greedy, on each case of a comparison, compared token by token.

Token ids and their top-k logprobs come from the server itself (``return_token_ids``, ``logprobs: k`` named by
token id), so two cases are compared on what the engine generated, not on a re-tokenisation of the text.

Per prompt the verdict is ``identical`` (same token ids), ``close`` (at the first differing position each side's
token is within the other side's top-k: a near-tie that numeric noise ordered differently, as vLLM's own
``check_logprobs_close`` accepts; the comparison stops there, since the continuations diverge) or ``different``.
In ``exact`` mode only ``identical`` passes. Every prompt must pass for the parity gate to pass.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from afd_e2e.profile import ParitySpec
from afd_e2e.workloads.completions import CompletionError, complete, token_texts

IDENTICAL, CLOSE, DIFFERENT, NOT_COMPARED = "identical", "close", "different", "not compared"


def collect_outputs(
    spec: ParitySpec,
    *,
    base_url: str,
    model: str,
    publish: Callable[[list[dict[str, Any]]], None],
    progress: Callable[[str], None],
    cancelled: threading.Event,
) -> list[dict[str, Any]]:
    """``parity_outputs`` of a case: one entry per prompt, in profile order, published as each arrives."""
    outputs: list[dict[str, Any]] = []
    for number, prompt in enumerate(spec.prompts, 1):
        if cancelled.is_set():
            break
        entry: dict[str, Any] = {
            "prompt": prompt,
            "text": None,
            "token_ids": None,
            "token_texts": None,
            "top_logprobs": None,
            "error": None,
        }
        try:
            answer = complete(
                base_url,
                model,
                prompt,
                max_tokens=spec.max_tokens,
                return_token_ids=True,
                top_logprobs=spec.top_logprobs,
            )
        except CompletionError as exc:
            entry["error"] = str(exc)
        else:
            entry.update(
                text=answer.text,
                token_ids=list(answer.token_ids or ()),
                # JSON keys are strings: token id -> logprob
                top_logprobs=[{str(token): lp for token, lp in top.items()} for top in answer.top_logprobs or ()],
            )
            try:
                entry["token_texts"] = token_texts(base_url, model, entry["token_ids"])
            except CompletionError as exc:  # only the display loses the token texts, not the comparison
                progress(f"parity: token texts unavailable ({exc})")
        outputs.append(entry)
        publish(outputs)
        progress(f"parity: {number}/{len(spec.prompts)} prompts")
    return outputs


def first_difference(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token (the shorter length when one is a prefix of the other); None if equal."""
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _top_k(output: dict[str, Any], position: int, k: int) -> dict[int, float] | None:
    """The k most likely tokens the side recorded at ``position`` (vLLM adds the chosen token as a k+1-th)."""
    tops = output.get("top_logprobs") or []
    if position >= len(tops):
        return None
    ranked = sorted(((int(token), float(lp)) for token, lp in tops[position].items()), key=lambda t: -t[1])
    return dict(ranked[:k])


def _side(output: dict[str, Any], position: int, other_token: int | None, k: int) -> dict[str, Any]:
    """One side at the first difference: its token, the text it added, its logprob and the other token's."""
    token_ids, texts = output["token_ids"], output.get("token_texts") or []
    token = token_ids[position] if position < len(token_ids) else None
    top = _top_k(output, position, k)
    return {
        "token_id": token,
        "text": texts[position] if token is not None and position < len(texts) else None,
        "logprob": None if top is None or token is None else top.get(token),
        "other_logprob": None if top is None or other_token is None else top.get(other_token),
        "other_in_top_k": top is not None and other_token is not None and other_token in top,
    }


def compare_prompt(
    prompt: str, baseline: dict[str, Any], candidate: dict[str, Any], *, mode: str, k: int
) -> dict[str, Any]:
    """One prompt's verdict: identical, close (logprobs mode, each token in the other's top-k) or different."""
    position = first_difference(baseline["token_ids"], candidate["token_ids"])
    if position is None:
        return {"prompt": prompt, "verdict": IDENTICAL, "position": None, "baseline": None, "candidate": None}
    base_ids, cand_ids = baseline["token_ids"], candidate["token_ids"]
    base_token = base_ids[position] if position < len(base_ids) else None
    cand_token = cand_ids[position] if position < len(cand_ids) else None
    base_side = _side(baseline, position, cand_token, k)
    cand_side = _side(candidate, position, base_token, k)
    close = mode == "logprobs" and base_side["other_in_top_k"] and cand_side["other_in_top_k"]
    return {
        "prompt": prompt,
        "verdict": CLOSE if close else DIFFERENT,
        "position": position,
        "baseline": base_side,
        "candidate": cand_side,
    }


def _token_text(side: Mapping[str, Any]) -> str:
    if side["token_id"] is None:
        return "ended"
    logprob = "not in its top-k" if side["logprob"] is None else f"{side['logprob']:.4f}"
    other = "" if side["other_logprob"] is None else f", the other's {side['other_logprob']:.4f}"
    return f"{side['token_id']} {side['text']!r} ({logprob}{other})"


def describe(entry: Mapping[str, Any], baseline_id: str, candidate_id: str) -> str:
    """One line for a prompt's verdict: where the outputs part and both tokens with their logprobs."""
    if entry["verdict"] in (IDENTICAL, NOT_COMPARED):
        return f"{entry['verdict']}: {entry['prompt']!r}"
    line = f"{entry['verdict']} at token {entry['position']}: {entry['prompt']!r}"
    base, cand = entry.get("baseline"), entry.get("candidate")
    if base and cand:
        line += f": {baseline_id} {_token_text(base)} vs {candidate_id} {_token_text(cand)}"
    return line


def parity_prompts(parity: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The per-prompt entries of a comparison's parity block; results written before logprobs parity held only
    ``identical`` and ``first_diff_token``, read here as identical/different without token detail."""
    entries = []
    for prompt in parity.get("prompts") or []:
        if "verdict" in prompt:
            entries.append(dict(prompt))
            continue
        verdict = IDENTICAL if prompt.get("identical") else DIFFERENT
        if not prompt.get("identical") and prompt.get("first_diff_token") is None:
            verdict = NOT_COMPARED
        entries.append(
            {
                "prompt": prompt.get("prompt"),
                "verdict": verdict,
                "position": prompt.get("first_diff_token"),
                "baseline": None,
                "candidate": None,
            }
        )
    return entries


def parity_summary(parity: Mapping[str, Any]) -> str:
    """``3/4 identical, 1 close (logprobs, top-5)``: the counts a reader needs first."""
    counts = [f"{parity.get('identical')}/{parity.get('total')} identical"]
    counts += [f"{parity[v]} {v}" for v in (CLOSE, DIFFERENT) if parity.get(v)]
    mode = parity.get("mode")
    how = f" ({mode}, top-{parity.get('top_logprobs')})" if mode == "logprobs" else f" ({mode})" if mode else ""
    return ", ".join(counts) + how


def compare_outputs(
    spec: ParitySpec,
    baseline_id: str,
    baseline: list[dict[str, Any]] | None,
    candidate_id: str,
    candidate: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    """The ``parity`` block of a comparison: per prompt identical / close / different, and the gate."""
    result: dict[str, Any] = {
        "status": "skipped",
        "failure": None,
        "mode": spec.mode,
        "top_logprobs": spec.top_logprobs,
        "identical": 0,
        "close": 0,
        "different": 0,
        "total": len(spec.prompts),
        "prompts": [],
    }
    if not spec.prompts:
        result["failure"] = "the profile lists no parity prompts"
        return result
    for case_id, outputs in ((baseline_id, baseline), (candidate_id, candidate)):
        if not outputs:
            result["failure"] = f"case {case_id} recorded no parity outputs"
            return result
    by_prompt = [{o["prompt"]: o for o in outputs} for outputs in (baseline, candidate)]
    errors = []
    for prompt in spec.prompts:
        sides = [side.get(prompt) for side in by_prompt]
        for case_id, side in zip((baseline_id, candidate_id), sides, strict=True):
            if side is None or side["error"]:
                errors.append(f"{case_id}: {side['error'] if side else 'prompt not run'}")
        if any(side is None or side["token_ids"] is None for side in sides):
            result["prompts"].append(
                {"prompt": prompt, "verdict": NOT_COMPARED, "position": None, "baseline": None, "candidate": None}
            )
            continue
        result["prompts"].append(compare_prompt(prompt, sides[0], sides[1], mode=spec.mode, k=spec.top_logprobs))
    for verdict in (IDENTICAL, CLOSE, DIFFERENT):
        result[verdict] = sum(p["verdict"] == verdict for p in result["prompts"])
    different = [p for p in result["prompts"] if p["verdict"] == DIFFERENT]
    if errors:
        result.update(status="failed", failure=f"{len(errors)} parity requests failed; {errors[0]}")
    elif different:
        beyond = "differ" if spec.mode == "exact" else f"differ beyond the top-{spec.top_logprobs} logprobs"
        first = describe(different[0], baseline_id, candidate_id)
        result.update(status="failed", failure=f"{len(different)}/{len(spec.prompts)} prompts {beyond}; {first}")
    else:
        result["status"] = "passed"
    return result
