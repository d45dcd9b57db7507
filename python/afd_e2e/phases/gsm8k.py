"""GSM8K, the correctness phase's first half (``phases/correctness.py`` runs it and registers its section): lm-eval's
prompts and grading (``phases/py``) over concurrent HTTP requests to the served model.

It keeps lm-eval's per-question verdicts but not its start-up cost, and writes a record per question
(``gsm8k/<case>.jsonl``) as answers arrive, so a cancel or crash leaves every graded question on disk.

Profile keys (docs/reference.md): ``workloads.gsm8k.questions``, ``shots``, ``max_tokens`` and ``min_correct`` (the
strict-match bar: at most ``questions``, and 0 only in a ``smoke_only`` profile), ``concurrency`` (default 1),
``dataset_env`` (default ``AFD_E2E_GSM8K_DIR``: where the staged data is, unless the run is given ``--gsm8k-dir``)
and ``accuracy_meaningful`` (default true). The case's ``gsm8k`` section is ``results/gsm8k_records.py``'s; the
reports show it through ``report/gsm8k_report.py`` (its testcases, its column of the per-case table, its answers in
the annotation's Model output).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from afd_e2e.phases.gsm8k_task import (
    REQUEST_SEED,
    Question,
    build_questions,
    eos_text,
    grade,
    load_dataset,
    resolve_dataset_dir,
    stop_sequences,
)
from afd_e2e.profile import Profile
from afd_e2e.profile.reader import Reader
from afd_e2e.results.gsm8k_records import SECTION, Gsm8kQuestion, Gsm8kResult
from afd_e2e.results.status import Status
from afd_e2e.workloads.completions import Completion, CompletionError, complete, served_model_root
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome

NAME = SECTION  # workloads.gsm8k, and the case's section
DEFAULT_DATASET_ENV = "AFD_E2E_GSM8K_DIR"
PROGRESS_EVERY_S = 10.0


@dataclass(frozen=True)
class Gsm8kSpec:
    """``workloads.gsm8k``: how many questions, with how many shots and tokens each, asked how many at a time, and
    the strict-match bar (``min_correct``) a case must reach; ``accuracy_meaningful`` false where the weights are
    random (a wrong answer then fails no testcase)."""

    questions: int
    shots: int
    max_tokens: int
    concurrency: int
    min_correct: int
    dataset_env: str
    accuracy_meaningful: bool


def read_gsm8k(r: Reader, profile: Profile) -> Gsm8kSpec:
    """The section, refused where its bar is above its questions, or is 0 (any answers pass) in a profile that is
    not ``smoke_only``: only random weights may say their accuracy means nothing."""
    spec = Gsm8kSpec(
        questions=r.positive_int("questions"),
        shots=r.positive_int("shots", minimum=0),
        max_tokens=r.positive_int("max_tokens"),
        concurrency=r.positive_int("concurrency", 1),
        min_correct=r.positive_int("min_correct", minimum=0),
        dataset_env=r.get("dataset_env", str, DEFAULT_DATASET_ENV),
        accuracy_meaningful=r.get("accuracy_meaningful", bool, True),
    )
    if spec.min_correct > spec.questions:
        r.fail(r.key("min_correct"), f"{spec.min_correct} > questions {spec.questions}", "lower min_correct")
    r.done()
    if spec.min_correct == 0 and not profile.smoke_only:
        r.fail(
            r.key("min_correct"),
            "0 passes any answers, and the profile is not smoke_only",
            "set min_correct to the correct answers the model must reach, or mark the profile smoke_only: true",
        )
    return spec


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
    """The case's ``gsm8k`` section in results.json."""
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


def check_gsm8k_inputs(profile: Profile, gsm8k_dir: Path | None) -> None:
    """The staged GSM8K files and enough rows for the profile (a UsageError naming the fix)."""
    if (spec := profile.workloads.get(NAME)) is not None:
        data = load_dataset(resolve_dataset_dir(spec.dataset_env, gsm8k_dir))
        build_questions(data["test"], data["train"], spec.questions, spec.shots)


def run_gsm8k(ctx: PhaseContext, spec: Gsm8kSpec) -> PhaseOutcome:
    """Every question asked of the case's server and graded, the section recorded after each answer; a server that
    does not name its checkpoint (whose tokenizer's EOS text is a stop sequence) fails it before any question."""
    case = ctx.case
    folder = resolve_dataset_dir(spec.dataset_env, ctx.gsm8k_dir)
    data = load_dataset(folder)
    questions = build_questions(data["test"], data["train"], spec.questions, spec.shots)
    records_rel = f"gsm8k/{case.id}.jsonl"
    publish = partial(ctx.record, SECTION)
    try:
        root = served_model_root(case.base_url, case.served_model_name, timeout_s=ctx.profile.budgets.request_s)
    except CompletionError as exc:
        section = summarise(spec, [], records_rel, Status.FAILED, str(exc))
        publish(section)
    else:
        ctx.progress(f"GSM8K: {spec.questions} questions, {spec.shots}-shot, staged in {folder}")
        section = evaluate(
            spec=spec,
            questions=questions,
            base_url=case.base_url,
            model=case.served_model_name,
            stop=stop_sequences(eos_text(Path(root))),
            records_path=ctx.out_dir / records_rel,
            records_rel=records_rel,
            publish=publish,
            progress=ctx.progress,
            cancelled=ctx.cancelled,
            heartbeat_s=PROGRESS_EVERY_S,
            request_timeout_s=ctx.profile.budgets.request_s,
        )
    return PhaseOutcome(section.status, f"gsm8k: {section.failure}" if section.failure else None)
