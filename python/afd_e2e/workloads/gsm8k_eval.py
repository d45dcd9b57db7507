"""The built-in GSM8K evaluator: lm-eval's prompts and grading (``gsm8k.py``) over concurrent HTTP requests.

It keeps lm-eval's per-question verdicts but not its start-up cost, and writes a record per question
(``gsm8k/<case>.jsonl``) as answers arrive, so a cancel or crash leaves every graded question on disk.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from afd_e2e.profile import Gsm8kSpec
from afd_e2e.results.model import Gsm8kQuestion, Gsm8kResult
from afd_e2e.results.status import Status
from afd_e2e.workloads.completions import Completion, CompletionError, complete
from afd_e2e.workloads.gsm8k import REQUEST_SEED, Question, grade


def question_record(question: Question, completion: Completion | None, error: str | None) -> dict[str, Any]:
    """One line of ``gsm8k/<case>.jsonl``."""
    record: dict[str, Any] = {
        "index": question.doc.index,
        "question": question.doc.question,
        "shots": list(question.shots),
        "prompt_sha256": question.prompt_sha256,
        "completion": None,
        "finish_reason": None,
        "extracted": None,
        "flexible": None,
        "gold": None,
        "correct": False,
        "flexible_correct": False,
        "error": error,
    }
    if completion is not None:
        verdict = grade(completion.text, question.doc.answer)
        record.update(
            completion=completion.text,
            finish_reason=completion.finish_reason,
            extracted=verdict.extracted,
            flexible=verdict.flexible,
            gold=verdict.gold,
            correct=verdict.correct,
            flexible_correct=verdict.flexible_correct,
        )
    return record


def summarise(
    spec: Gsm8kSpec, records: list[dict[str, Any]], records_rel: str, status: Status, failure: str | None
) -> Gsm8kResult:
    """The ``gsm8k`` section of a case in results.json."""
    return Gsm8kResult(
        status=status,
        correct=sum(r["correct"] for r in records),
        total=spec.questions,
        min_correct=spec.min_correct,
        accuracy_meaningful=spec.accuracy_meaningful,
        flexible_correct=sum(r["flexible_correct"] for r in records),
        records=records_rel,
        failure=failure,
        questions=[
            Gsm8kQuestion(**{k: r[k] for k in ("index", "prompt_sha256", "extracted", "flexible", "gold", "correct")})
            for r in records
        ],
    )


def final_status(spec: Gsm8kSpec, records: list[dict[str, Any]], cancelled: bool) -> tuple[Status, str | None]:
    errors = [r for r in records if r["error"]]
    correct = sum(r["correct"] for r in records)
    if cancelled:
        return Status.CANCELLED, f"cancelled after {len(records)} of {spec.questions} questions"
    if errors:
        first = errors[0]
        return (
            Status.FAILED,
            f"{len(errors)} of {spec.questions} requests failed; question {first['index']}: {first['error']}",
        )
    if correct < spec.min_correct:
        return Status.FAILED, f"strict match {correct}/{spec.questions}, needs {spec.min_correct}"
    return Status.PASSED, None


def _write_records(path: Path, records: list[dict[str, Any]]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    os.replace(tmp, path)


def evaluate(
    *,
    spec: Gsm8kSpec,
    questions: list[Question],
    base_url: str,
    model: str,
    stop: list[str],
    records_path: Path,
    records_rel: str,
    publish: Callable[[Gsm8kResult], None],
    progress: Callable[[str], None],
    cancelled: threading.Event,
    heartbeat_s: float,
    request_timeout_s: float,
) -> Gsm8kResult:
    """Ask every question with ``spec.concurrency`` requests in flight; publish the section after each answer."""
    records_path.parent.mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = []
    _write_records(records_path, records)

    def ask(question: Question) -> dict[str, Any] | None:
        if cancelled.is_set():
            return None
        try:
            answer = complete(
                base_url,
                model,
                question.prompt,
                max_tokens=spec.max_tokens,
                stop=stop,
                seed=REQUEST_SEED,
                timeout_s=request_timeout_s,
            )
        except CompletionError as exc:
            return question_record(question, None, str(exc))
        return question_record(question, answer, None)

    pool = ThreadPoolExecutor(max_workers=spec.concurrency, thread_name_prefix="gsm8k")
    pending: set[Future[dict[str, Any] | None]] = {pool.submit(ask, q) for q in questions}
    try:
        while pending and not cancelled.is_set():
            done, pending = wait(pending, timeout=heartbeat_s, return_when=FIRST_COMPLETED)
            answered = [record for future in done if (record := future.result()) is not None]
            if answered:
                records = sorted(records + answered, key=lambda r: r["index"])
                _write_records(records_path, records)
                publish(summarise(spec, records, records_rel, Status.RUNNING, None))
            correct = sum(r["correct"] for r in records)
            progress(f"gsm8k: {len(records)}/{len(questions)} answered, {correct} strict-correct, {len(pending)} left")
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    status, failure = final_status(spec, records, cancelled.is_set())
    section = summarise(spec, records, records_rel, status, failure)
    publish(section)
    return section
