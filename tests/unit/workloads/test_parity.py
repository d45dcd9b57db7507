"""Output parity between two cases: identical / close (each token in the other's top-k) / different, per prompt.

The real cases come from ``tests/fixtures/parity/tiny-cpu-logprobs.json``: outputs with top-5 logprobs recorded
from the CPU vLLM by ``record_tiny_cpu.py`` (bf16, the same weights in fp32, and a checkpoint with shuffled
``lm_head`` rows). The rules themselves are also shown on small hand-written token lists.
"""

from __future__ import annotations

import pytest

from afd_e2e.profile import builtin_profiles, load_profile
from afd_e2e.results.parity_records import ParityOutput, ParityPrompt, ParitySide
from afd_e2e.results.parity_text import describe_prompt, parity_summary
from afd_e2e.results.status import ParityVerdict, Status
from afd_e2e.workloads.parity import ParitySpec, compare_outputs, first_difference, parity_spec
from fixtures.parity.record_tiny_cpu import load_fixture

RECORDED = load_fixture()
REAL_PROMPTS = tuple(output.prompt for output in RECORDED["bf16"])
LOGPROBS = ParitySpec(prompts=REAL_PROMPTS, max_tokens=16, mode="logprobs", top_logprobs=5)
EXACT = ParitySpec(prompts=REAL_PROMPTS, max_tokens=16, mode="exact", top_logprobs=5)
SMALL = ParitySpec(prompts=("a", "b", "c"), max_tokens=4, mode="logprobs", top_logprobs=2)


def _output(prompt: str, token_ids: list[int], tops: list[dict[int, float]]) -> ParityOutput:
    top_logprobs = [{str(token): lp for token, lp in top.items()} for top in tops]
    texts = [f"<{token}>" for token in token_ids]
    return ParityOutput(prompt, "".join(texts), token_ids, top_logprobs=top_logprobs, token_texts=texts)


def _outputs(*sides) -> list[ParityOutput]:
    """Hand-written outputs of SMALL's prompts: (token_ids, top logprobs per position), or an error string."""
    return [
        ParityOutput(prompt, error=side) if isinstance(side, str) else _output(prompt, *side)
        for prompt, side in zip(SMALL.prompts, sides, strict=True)
    ]


def _verdicts(result) -> list[ParityVerdict | None]:
    return [p.verdict for p in result.prompts]


def test_first_difference():
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 9, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2
    assert first_difference([], [4]) == 0


def test_real_fp32_vs_bf16_is_close_at_a_near_tie_and_passes():
    result = compare_outputs(LOGPROBS, "bf16", RECORDED["bf16"], "fp32", RECORDED["fp32"])
    assert result.status is Status.PASSED, result.failure
    assert result.close >= 1 and result.different == 0
    close = next(p for p in result.prompts if p.verdict is ParityVerdict.CLOSE)
    base, cand = close.baseline, close.candidate
    assert base and cand and base.token_id != cand.token_id
    # each side's token is within the other's top-5, and each side ranked its own token at least as high
    assert base.other_in_top_k and cand.other_in_top_k
    assert base.logprob >= base.other_logprob and cand.logprob >= cand.other_logprob
    line = describe_prompt(close, "bf16", "fp32")
    assert line.startswith(f"close at token {close.first_diff_token}: ") and f"fp32 {cand.token_id} " in line


def test_real_fp32_vs_bf16_fails_in_exact_mode():
    result = compare_outputs(EXACT, "bf16", RECORDED["bf16"], "fp32", RECORDED["fp32"])
    assert result.status is Status.FAILED and result.different >= 1 and result.close == 0
    assert "prompts differ; different at token" in (result.failure or "")


def test_real_shuffled_lm_head_is_different_and_fails_naming_both_tokens():
    result = compare_outputs(LOGPROBS, "bf16", RECORDED["bf16"], "shuffled-head", RECORDED["shuffled-head"])
    total = len(REAL_PROMPTS)
    assert result.status is Status.FAILED
    assert (result.different, result.identical, result.close) == (total, 0, 0)
    first = result.prompts[0]
    assert first.first_diff_token == 0 and first.baseline and first.candidate
    assert not first.baseline.other_in_top_k and first.baseline.other_logprob is None
    assert first.baseline.logprob is not None and first.baseline.logprob < 0
    assert (result.failure or "").startswith(f"{total}/{total} prompts differ beyond the top-5 logprobs")
    assert f"bf16 {first.baseline.token_id} {first.baseline.text!r}" in (result.failure or "")
    assert f"vs shuffled-head {first.candidate.token_id} " in (result.failure or "")


def test_real_outputs_against_themselves_are_identical():
    result = compare_outputs(LOGPROBS, "bf16", RECORDED["bf16"], "again", RECORDED["bf16"])
    assert (result.status, result.identical) == (Status.PASSED, 4)
    assert _verdicts(result) == [ParityVerdict.IDENTICAL] * 4
    assert parity_summary(result) == "4/4 identical (logprobs, top-5)"


def test_close_needs_each_token_in_the_others_top_k():
    # prompt a: 7 vs 8 where each side has the other's token in its top-2: close
    # prompt b: side two's token 9 is not in side one's top-2: different, though side one's 5 is in side two's
    # prompt c: the top-2 holds 3 entries (vLLM adds the chosen token); only the 2 most likely count
    base = _outputs(
        ([1, 7], [{1: -0.1}, {7: -1.0, 8: -1.1}]),
        ([5], [{5: -0.5, 6: -0.9, 9: -3.0}]),
        ([3], [{3: -0.2, 4: -0.3, 2: -0.4}]),
    )
    cand = _outputs(
        ([1, 8, 8], [{1: -0.1}, {8: -1.0, 7: -1.05}, {8: -1.0}]),
        ([9], [{9: -0.5, 5: -0.6}]),
        ([2], [{2: -0.2, 3: -0.3, 4: -0.4}]),
    )
    result = compare_outputs(SMALL, "one", base, "two", cand)
    assert _verdicts(result) == [ParityVerdict.CLOSE, ParityVerdict.DIFFERENT, ParityVerdict.DIFFERENT]
    assert result.prompts[0].first_diff_token == 1 and result.status is Status.FAILED
    assert result.prompts[1].baseline == ParitySide(5, "<5>", -0.5, None, False)
    assert result.prompts[1].candidate == ParitySide(9, "<9>", -0.5, -0.6, True)
    assert (result.failure or "").startswith("2/3 prompts differ beyond the top-2 logprobs; different at token 0: 'b'")


def test_a_side_that_ends_early_is_different():
    base = _outputs(([1, 2], [{1: -0.1}, {2: -0.1}]), ([4], [{4: -0.1}]), ([6], [{6: -0.1}]))
    cand = _outputs(([1], [{1: -0.1}]), ([4], [{4: -0.1}]), ([6], [{6: -0.1}]))
    result = compare_outputs(SMALL, "one", base, "two", cand)
    assert _verdicts(result) == [ParityVerdict.DIFFERENT, ParityVerdict.IDENTICAL, ParityVerdict.IDENTICAL]
    assert describe_prompt(result.prompts[0], "one", "two").endswith("vs two ended")


def test_a_failed_request_fails_parity_and_names_it():
    base = _outputs(([1], [{1: -0.1}]), ([2], [{2: -0.1}]), ([3], [{3: -0.1}]))
    cand = _outputs(([1], [{1: -0.1}]), "HTTP 500: boom", ([3], [{3: -0.1}]))
    result = compare_outputs(SMALL, "tp1", base, "tp2", cand)
    assert result.status is Status.FAILED and "tp2: HTTP 500: boom" in (result.failure or "")
    assert result.prompts[1].verdict is ParityVerdict.NOT_COMPARED


def test_a_side_without_outputs_is_skipped_with_the_reason():
    result = compare_outputs(SMALL, "tp1", _outputs(([1], [{}]), ([2], [{}]), ([3], [{}])), "tp2", None)
    assert result.status is Status.SKIPPED and result.failure == "case tp2 recorded no parity outputs"


def test_a_profile_without_prompts_is_skipped():
    result = compare_outputs(ParitySpec((), 4, "logprobs", 5), "a", [], "b", [])
    assert result.status is Status.SKIPPED and result.failure == "the profile lists no parity prompts"


@pytest.mark.parametrize(
    ("stored", "verdict"),
    [
        (ParityPrompt("p", identical=True), ParityVerdict.IDENTICAL),
        (ParityPrompt("p", identical=False, first_diff_token=15), ParityVerdict.DIFFERENT),
        (ParityPrompt("p", identical=False), ParityVerdict.NOT_COMPARED),
    ],
)
def test_results_written_before_logprobs_parity_still_read(stored, verdict):
    assert stored.outcome is verdict


@pytest.mark.parametrize("name", sorted(builtin_profiles()))
def test_every_shipped_profiles_parity_gate_can_fail(name):
    spec = parity_spec(load_profile(name))
    if spec is None:
        pytest.skip(f"{name} has no parity workload")
    k = spec.top_logprobs

    def outputs(first_token: int) -> list[ParityOutput]:  # top-k: tokens first_token .. first_token + k - 1
        return [_output(p, [first_token], [{first_token + i: -1.0 - i for i in range(k)}]) for p in spec.prompts]

    assert compare_outputs(spec, "a", outputs(100), "b", outputs(100)).status is Status.PASSED
    different = compare_outputs(spec, "a", outputs(100), "b", outputs(100 + k))  # disjoint top-k sets
    assert different.status is Status.FAILED and different.different == len(spec.prompts)
