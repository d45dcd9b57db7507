"""Output parity between two cases: identical share and first differing token."""

from __future__ import annotations

from afd_e2e.profile import ParitySpec
from afd_e2e.results.model import ParityOutput, ParityPrompt
from afd_e2e.workloads.parity import compare_outputs, first_difference

SPEC = ParitySpec(prompts=("a", "b", "c"), max_tokens=4, min_identical_share=0.5)


def _outputs(*token_lists, error=None):
    return [
        ParityOutput(p, "x", ids, error if ids is None else None)
        for p, ids in zip(SPEC.prompts, token_lists, strict=True)
    ]


def test_first_difference():
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 9, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2
    assert first_difference([], [4]) == 0


def test_share_and_positions():
    base = _outputs([1, 2, 3], [4, 5], [6])
    cand = _outputs([1, 2, 3], [4, 7], [6, 8])
    result = compare_outputs(SPEC, "tp1", base, "tp2", cand)
    assert (result.identical, result.total, result.share) == (1, 3, 1 / 3)
    assert [p.first_diff_token for p in result.prompts] == [None, 1, 1]
    assert result.status == "failed" and "1/3 identical, needs 50%" in result.failure
    assert compare_outputs(SPEC, "tp1", base, "tp1-again", base).status == "passed"


def test_a_failed_request_fails_parity_and_names_it():
    base = _outputs([1], [2], [3])
    cand = _outputs([1], None, [3], error="HTTP 500: boom")
    result = compare_outputs(SPEC, "tp1", base, "tp2", cand)
    assert result.status == "failed" and "tp2: HTTP 500: boom" in result.failure
    assert result.prompts[1] == ParityPrompt("b", identical=False, first_diff_token=None)


def test_a_side_without_outputs_is_skipped_with_the_reason():
    result = compare_outputs(SPEC, "tp1", _outputs([1], [2], [3]), "tp2", None)
    assert result.status == "skipped" and result.failure == "case tp2 recorded no parity outputs"


def test_a_profile_without_prompts_is_skipped():
    result = compare_outputs(ParitySpec((), 4, 1.0), "a", [], "b", [])
    assert result.status == "skipped" and result.failure == "the profile lists no parity prompts"
