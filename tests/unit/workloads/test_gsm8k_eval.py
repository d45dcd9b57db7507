"""The built-in evaluator's bookkeeping: records, summary, failures and cancel (the HTTP path runs in the
engine test against the real CPU vLLM)."""

from __future__ import annotations

import json
import socket
import threading

from afd_e2e.phases.gsm8k import Gsm8kSpec, evaluate, question_record, summarise
from afd_e2e.phases.gsm8k_task import build_questions
from afd_e2e.results.gsm8k_records import Gsm8kQuestion
from afd_e2e.results.status import Status
from afd_e2e.workloads.completions import Completion

SPEC = Gsm8kSpec(
    questions=3, shots=2, max_tokens=8, concurrency=2, min_correct=1, dataset_env="X", accuracy_meaningful=True
)


def test_record_and_summary_of_graded_answers(gsm8k_data):
    questions = build_questions(gsm8k_data["test"], gsm8k_data["train"], 2, 2)
    right = question_record(questions[0], Completion("So 9 * 2 = 18.\n#### 18", (1, 2), "stop"), None)
    wrong = question_record(questions[1], Completion("#### 4", None, "length"), None)
    assert right["correct"] and right["extracted"] == "18" and right["gold"] == "18" and right["shots"]
    assert not wrong["correct"] and wrong["finish_reason"] == "length"
    section = summarise(SPEC, [right, wrong], "gsm8k/c.jsonl", Status.PASSED, None)
    assert (section.correct, section.total, section.flexible_correct) == (1, 3, 1)
    assert section.questions[0] == Gsm8kQuestion(0, questions[0].prompt_sha256, "18", "18", "18", correct=True)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _evaluate(gsm8k_data, tmp_path, cancelled):
    published, lines = [], []
    section = evaluate(
        spec=SPEC,
        questions=build_questions(gsm8k_data["test"], gsm8k_data["train"], 3, 2),
        base_url=f"http://127.0.0.1:{_closed_port()}",
        model="m",
        stop=["Question:"],
        records_path=tmp_path / "gsm8k" / "c.jsonl",
        records_rel="gsm8k/c.jsonl",
        publish=published.append,
        progress=lines.append,
        cancelled=cancelled,
        heartbeat_s=0.5,
        request_timeout_s=5.0,
    )
    return section, published, lines


def test_unreachable_server_fails_every_question_with_the_reason(gsm8k_data, tmp_path):
    section, published, lines = _evaluate(gsm8k_data, tmp_path, threading.Event())
    assert section.status == "failed"
    assert section.failure.startswith("3 of 3 requests failed; question 0: POST http://127.0.0.1:")
    assert "ConnectionError" in section.failure
    records = [json.loads(line) for line in (tmp_path / "gsm8k" / "c.jsonl").read_text().splitlines()]
    assert [r["index"] for r in records] == [0, 1, 2] and all(r["error"] and not r["correct"] for r in records)
    assert published[-1] == section and lines[-1].startswith("gsm8k: 3/3 answered")


def test_cancel_before_start_asks_nothing(gsm8k_data, tmp_path):
    cancelled = threading.Event()
    cancelled.set()
    section, _, _ = _evaluate(gsm8k_data, tmp_path, cancelled)
    assert (section.status, section.failure, section.questions) == (
        "cancelled",
        "cancelled after 0 of 3 questions",
        [],
    )
