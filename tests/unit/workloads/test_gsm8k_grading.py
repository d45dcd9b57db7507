"""Strict-match and flexible-extract grading give lm-eval's verdicts (fixtures computed by lm-eval 0.4.13's own
filters and metric, see tests/fixtures/lm_eval_gsm8k/make_grading.py), on hand-written and real answers."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest

from afd_e2e.phases.gsm8k_task import extract_flexible, extract_strict, grade, normalise
from lm_eval_reference import read_samples
from repo_paths import FIXTURES

GRADING = json.loads((FIXTURES / "lm_eval_gsm8k" / "grading.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("row", GRADING["rows"], ids=lambda r: repr(r["completion"])[:40])
def test_tricky_completions_graded_as_lm_eval_grades_them(gsm8k_data, row):
    verdict = grade(row["completion"], gsm8k_data["test"][row["index"]].answer)
    assert (verdict.extracted, verdict.correct) == (row["strict"], row["strict_correct"])
    assert (verdict.flexible, verdict.flexible_correct) == (row["flexible"], row["flexible_correct"])


def test_fixture_covers_the_tricky_kinds():
    completions = [r["completion"] for r in GRADING["rows"]]
    assert any("," in c and r["strict_correct"] for c, r in zip(completions, GRADING["rows"], strict=True))
    assert any("$" in c for c in completions) and any("-" in c for c in completions)
    assert any(c.count("####") > 1 for c in completions) and any(c.endswith(".") for c in completions)
    assert {r["strict_correct"] for r in GRADING["rows"]} == {True, False}


def test_every_real_test_answer_grades_itself_correct(gsm8k_data):
    for doc in gsm8k_data["test"]:
        verdict = grade(doc.answer, doc.answer)
        assert verdict.correct, doc.index
        assert verdict.gold == normalise(doc.answer.split("#### ")[-1])


def test_a_real_answer_is_wrong_for_another_question(gsm8k_data):
    def gold(doc):
        return doc.answer.split("#### ")[-1]

    test = gsm8k_data["test"]
    pairs = [(a, b) for a, b in pairwise(test[:51]) if gold(a) != gold(b)]
    assert len(pairs) > 40
    assert not any(grade(b.answer, a.answer).correct for a, b in pairs)


def test_extraction_details():
    assert extract_strict("#### 5\n#### 6") == "5" and extract_flexible("#### 5\n#### 6") == "6"
    assert extract_strict("no number") == "[invalid]" == extract_flexible("no number")
    assert normalise("#### $1,234.") == "1234"
    assert normalise("Step\n#### 7") == "7"


@pytest.mark.parametrize("name", ["samples-7q-8shot.jsonl", "samples-3q-2shot.jsonl"])
def test_same_verdicts_as_lm_eval_on_its_recorded_completions(gsm8k_data, name):
    """Equivalence on completions lm-eval recorded from the real CPU vLLM: same extraction, same verdicts."""
    reference = read_samples(FIXTURES / "lm_eval_gsm8k" / name)
    assert reference
    for record in reference:
        verdict = grade(record["completion"], gsm8k_data["test"][record["index"]].answer)
        assert verdict.extracted == record["extracted"]
        assert verdict.flexible == record["flexible"]
        assert (verdict.correct, verdict.flexible_correct) == (record["correct"], record["flexible_correct"])
