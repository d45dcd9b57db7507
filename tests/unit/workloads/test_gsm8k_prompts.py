"""GSM8K prompts are lm-eval's, byte for byte: checked against samples files lm-eval 0.4.13 itself logged
(``lm_eval --tasks gsm8k --num_fewshot K --limit N --log_samples`` on the staged data, see tests/lm_eval_reference.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from afd_e2e.errors import UsageError
from afd_e2e.phases.gsm8k_task import Doc, build_questions, eos_text, stop_sequences
from repo_paths import FIXTURES


def _lm_eval_prompts(name: str) -> dict[int, tuple[str, str, dict]]:
    rows = [json.loads(line) for line in (FIXTURES / "lm_eval_gsm8k" / name).read_text(encoding="utf-8").splitlines()]
    return {
        int(r["doc_id"]): (
            r["arguments"]["gen_args_0"]["arg_0"],
            r["prompt_hash"],
            r["arguments"]["gen_args_0"]["arg_1"],
        )
        for r in rows
    }


@pytest.mark.parametrize(
    ("name", "count", "shots"), [("samples-7q-8shot.jsonl", 7, 8), ("samples-3q-2shot.jsonl", 3, 2)]
)
def test_prompts_and_hashes_equal_lm_eval_logged_ones(gsm8k_data, name, count, shots):
    reference = _lm_eval_prompts(name)
    questions = build_questions(gsm8k_data["test"], gsm8k_data["train"], count, shots)
    assert [q.doc.index for q in questions] == sorted(reference) == list(range(count))
    for question in questions:
        prompt, prompt_hash, gen_kwargs = reference[question.doc.index]
        assert question.prompt == prompt
        assert question.prompt_sha256 == prompt_hash
        assert stop_sequences(None) == gen_kwargs["until"]


def test_prompt_format_golden():
    test = [Doc(0, "How many?", "2+2=4\n#### 4")]
    train = [Doc(0, "Shot one?", "1\n#### 1"), Doc(1, "Shot two?", "2\n#### 2")]
    (question,) = build_questions(test, train, 1, 2)
    first, second = (train[i] for i in question.shots)
    assert question.prompt == (
        f"Question: {first.question}\nAnswer: {first.answer}\n\n"
        f"Question: {second.question}\nAnswer: {second.answer}\n\n"
        "Question: How many?\nAnswer:"
    )
    (zero_shot,) = build_questions(test, train, 1, 0)
    assert zero_shot.prompt == "Question: How many?\nAnswer:" and zero_shot.shots == ()


def test_shots_are_seeded_draws_not_the_first_rows(gsm8k_data):
    questions = build_questions(gsm8k_data["test"], gsm8k_data["train"], 7, 8)
    assert questions[0].shots != tuple(range(8))
    assert len({q.shots for q in questions}) == 7  # one draw per question, from one generator
    assert build_questions(gsm8k_data["test"], gsm8k_data["train"], 7, 8) == questions


def test_too_many_questions_or_shots_is_a_usage_error(gsm8k_data):
    with pytest.raises(UsageError, match="test split has 1319"):
        build_questions(gsm8k_data["test"], gsm8k_data["train"], 2000, 8)
    with pytest.raises(UsageError, match="train split has 1"):
        build_questions(gsm8k_data["test"], gsm8k_data["train"][:1], 1, 8)


def test_stop_sequences_add_the_tokenizer_eos_like_lm_eval(tmp_path: Path):
    assert stop_sequences("<|endoftext|>") == ["Question:", "</s>", "<|im_end|>", "<|endoftext|>"]
    assert stop_sequences("<|im_end|>") == ["Question:", "</s>", "<|im_end|>"]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": {"content": "<eos>"}}), encoding="utf-8")
    assert eos_text(tmp_path) == "<eos>"
    assert eos_text(tmp_path / "missing") is None
