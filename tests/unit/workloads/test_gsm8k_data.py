"""Staged GSM8K data: read from a folder, validated, never downloaded."""

from __future__ import annotations

import json

import pytest

from afd_e2e.errors import UsageError
from afd_e2e.phases.gsm8k_task import load_dataset, resolve_dataset_dir
from repo_paths import GSM8K_DIR


def test_real_staged_splits_load_in_file_order(gsm8k_data):
    assert len(gsm8k_data["train"]) == 7473
    assert len(gsm8k_data["test"]) == 1319
    first = json.loads((GSM8K_DIR / "test.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert gsm8k_data["test"][0].question == first["question"]
    assert gsm8k_data["test"][0].answer.endswith("#### 18")
    assert [d.index for d in gsm8k_data["train"][:3]] == [0, 1, 2]


def _stage(tmp_path, train: str, test: str):
    (tmp_path / "train.jsonl").write_text(train, encoding="utf-8")
    (tmp_path / "test.jsonl").write_text(test, encoding="utf-8")
    return tmp_path


ROW = json.dumps({"question": "q?", "answer": "a\n#### 1"}) + "\n"


@pytest.mark.parametrize(
    ("train", "test", "message"),
    [
        (ROW, "{not json\n", "test.jsonl:1: not JSON"),
        (ROW, json.dumps({"question": "q"}) + "\n", "test.jsonl:1: a row needs string fields question and answer"),
        (ROW, ROW + json.dumps(["list"]) + "\n", "test.jsonl:2: a row needs"),
        ("\n", ROW, "train.jsonl has no rows"),
    ],
)
def test_malformed_file_is_a_usage_error_naming_file_and_line(tmp_path, train, test, message):
    with pytest.raises(UsageError, match=message.replace("?", r"\?")) as caught:
        load_dataset(_stage(tmp_path, train, test))
    assert caught.value.fix


def test_missing_folder_or_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        load_dataset(tmp_path / "nowhere")
    (tmp_path / "train.jsonl").write_text(ROW, encoding="utf-8")
    with pytest.raises(UsageError, match=r"test\.jsonl does not exist"):
        load_dataset(tmp_path)


def test_dataset_dir_prefers_the_flag_then_the_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv("GSM8K_TEST_DIR", "/staged/elsewhere")
    assert resolve_dataset_dir("GSM8K_TEST_DIR", tmp_path) == tmp_path
    assert str(resolve_dataset_dir("GSM8K_TEST_DIR", None)) == "/staged/elsewhere"
    monkeypatch.delenv("GSM8K_TEST_DIR")
    with pytest.raises(UsageError, match="GSM8K_TEST_DIR is not set"):
        resolve_dataset_dir("GSM8K_TEST_DIR", None)
