"""GSM8K as lm-eval's ``gsm8k`` task defines it: staged data, few-shot prompts, stop sequences, strict-match grading.

Mirrors lm-evaluation-harness 0.4.13 (``lm_eval/tasks/gsm8k/gsm8k.yaml``, ``api/samplers.py``, ``api/task.py``,
``filters/extraction.py``, ``api/metrics.py``) so a verdict here is the verdict lm-eval gives on the same completion:

- test documents in file order; few-shot examples drawn from the train split by ONE ``random.Random(1234)``
  (lm-eval's default ``fewshot_random_seed``) calling ``sample(train, k)`` once per test document, in order;
- ``Question: {question}\\nAnswer:`` + ``" "`` + full worked answer + ``"\\n\\n"`` per shot, then the question;
- stop at ``Question:``, ``</s>``, ``<|im_end|>`` and the tokenizer's EOS text; greedy; seed 1234 in the request;
- strict-match: first ``#### (\\-?[0-9\\.\\,]+)``; flexible-extract: last match of ``(-?[$0-9.,]{2,})|(-?[0-9]+)``;
  ``[invalid]`` when nothing matches; then exact match after deleting ``,``, ``$``, everything up to ``#### ``
  and a trailing ``.``, case-insensitive, on both the extraction and the gold answer.

The data is never downloaded: a missing or malformed staged file is a UsageError. Pure rules, kept apart from
``phases/gsm8k.py`` (which asks these questions of a served model and grades the answers by them) so that a check
against lm-eval's own verdicts reads them alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
from dataclasses import dataclass
from pathlib import Path

from afd_e2e.errors import UsageError

FEWSHOT_SEED = 1234
REQUEST_SEED = 1234
STOP_SEQUENCES = ("Question:", "</s>", "<|im_end|>")
STRICT_PATTERN = re.compile(r"#### (\-?[0-9\.\,]+)")
FLEXIBLE_PATTERN = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
FALLBACK = "[invalid]"
IGNORED_PATTERNS = (",", r"\$", r"(?s).*#### ", r"\.$")
SPLITS = ("train", "test")
STAGED_HINT = "a folder holding GSM8K's train.jsonl and test.jsonl (e.g. ../shared/datasets/gsm8k)"


@dataclass(frozen=True)
class Doc:
    index: int  # row in its split, lm-eval's doc_id for the test split
    question: str
    answer: str  # full worked answer ending in "#### <number>"


@dataclass(frozen=True)
class Question:
    """One evaluation prompt: the test document, the train rows used as shots, and the exact prompt text."""

    doc: Doc
    shots: tuple[int, ...]
    prompt: str

    @property
    def prompt_sha256(self) -> str:
        """Same value as lm-eval's ``prompt_hash`` in its samples file."""
        return hashlib.sha256(self.prompt.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Grade:
    extracted: str  # strict-match extraction, "[invalid]" when absent
    flexible: str  # flexible-extract extraction
    gold: str  # the gold answer normalised
    correct: bool  # strict-match verdict
    flexible_correct: bool


# --------------------------------------------------------------------------- staged data


def resolve_dataset_dir(env_name: str, explicit: Path | None) -> Path:
    """The staged folder: an explicit one (``--gsm8k-dir``) first, else ``$env_name``; neither is a UsageError."""
    if explicit is not None:
        return explicit
    raw = os.environ.get(env_name)
    if raw:
        return Path(raw)
    raise UsageError(f"no GSM8K data: {env_name} is not set", f"set {env_name} or pass --gsm8k-dir {STAGED_HINT}")


def load_split(folder: Path, split: str) -> list[Doc]:
    path = folder / f"{split}.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as exc:
        raise UsageError(f"GSM8K file {path} does not exist", f"point to {STAGED_HINT}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"GSM8K file {path} is unreadable: {exc}", f"restage {STAGED_HINT}") from exc
    docs = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{number}: not JSON ({exc.msg})", "restage the file from GSM8K's jsonl") from exc
        if not (isinstance(row, dict) and isinstance(row.get("question"), str) and isinstance(row.get("answer"), str)):
            raise UsageError(f"{path}:{number}: a row needs string fields question and answer", "restage the file")
        docs.append(Doc(len(docs), row["question"], row["answer"]))
    if not docs:
        raise UsageError(f"GSM8K file {path} has no rows", f"restage {STAGED_HINT}")
    return docs


def load_dataset(folder: Path) -> dict[str, list[Doc]]:
    """Both splits, validated. Cheap enough for a preflight to call before any model loads."""
    if not folder.is_dir():
        raise UsageError(
            f"GSM8K folder {folder} does not exist", f"point --gsm8k-dir (or AFD_E2E_GSM8K_DIR) to {STAGED_HINT}"
        )
    return {split: load_split(folder, split) for split in SPLITS}


# --------------------------------------------------------------------------- prompts


def doc_to_text(doc: Doc) -> str:
    return f"Question: {doc.question}\nAnswer:"


def build_questions(test: list[Doc], train: list[Doc], count: int, shots: int) -> list[Question]:
    """The first ``count`` test documents with lm-eval's few-shot draw (one seeded generator, in document order)."""
    if count > len(test):
        raise UsageError(f"{count} GSM8K questions asked, the test split has {len(test)}", "lower gsm8k.questions")
    if shots > len(train):
        raise UsageError(f"{shots} shots asked, the train split has {len(train)}", "lower gsm8k.shots")
    rnd = random.Random(FEWSHOT_SEED)
    questions = []
    for doc in test[:count]:
        examples = rnd.sample(train, shots) if shots else []
        context = "".join(f"{doc_to_text(shot)} {shot.answer}\n\n" for shot in examples)
        questions.append(Question(doc, tuple(shot.index for shot in examples), context + doc_to_text(doc)))
    return questions


def stop_sequences(eos_text: str | None) -> list[str]:
    """lm-eval's ``until`` plus the tokenizer's EOS text, as its local-completions client sends them."""
    stops = list(STOP_SEQUENCES)
    if eos_text and eos_text not in stops:
        stops.append(eos_text)
    return stops


def eos_text(model_dir: Path) -> str | None:
    """The EOS token text a checkpoint's tokenizer declares (string or added-token mapping), if any."""
    try:
        config = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    eos = config.get("eos_token")
    if isinstance(eos, dict):
        eos = eos.get("content")
    return eos if isinstance(eos, str) else None


# --------------------------------------------------------------------------- grading


def _extract(pattern: re.Pattern[str], completion: str, pick: int) -> str:
    matches = pattern.findall(completion)
    if not matches:
        return FALLBACK
    match = matches[pick]
    if isinstance(match, tuple):
        match = next((group for group in match if group), FALLBACK)
    return match.strip()


def extract_strict(completion: str) -> str:
    return _extract(STRICT_PATTERN, completion, 0)


def extract_flexible(completion: str) -> str:
    return _extract(FLEXIBLE_PATTERN, completion, -1)


def normalise(text: str) -> str:
    for pattern in IGNORED_PATTERNS:
        text = re.sub(pattern, "", text)
    return text.lower()


def grade(completion: str, answer: str) -> Grade:
    gold = normalise(answer)
    strict, flexible = extract_strict(completion), extract_flexible(completion)
    return Grade(strict, flexible, gold, normalise(strict) == gold, normalise(flexible) == gold)
