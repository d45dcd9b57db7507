"""lm-evaluation-harness's own ``gsm8k`` task, run offline on the staged data: the reference the built-in
evaluator must agree with, question by question (used by the tests and ``benchmarks/gsm8k_client.py``; not part of
the afd_e2e package, which never runs lm-eval).

lm-eval is not a dependency of afd-e2e: it lives in its own environment (``scripts/install-lm-eval``), found
through ``$AFD_E2E_LM_EVAL_PYTHON`` or ``.lm-eval-venv`` in the repository. The task is lm-eval's shipped
``gsm8k.yaml`` included by absolute path, with only the dataset swapped for the staged jsonl files.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from afd_e2e.errors import UsageError

PYTHON_ENV = "AFD_E2E_LM_EVAL_PYTHON"
TASK = "gsm8k_staged"
OFFLINE_ENV = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def find_python(repo: Path) -> Path | None:
    """``$AFD_E2E_LM_EVAL_PYTHON``, else ``<repo>/.lm-eval-venv/bin/python``; None when neither exists."""
    raw = os.environ.get(PYTHON_ENV)
    candidate = Path(raw) if raw else repo / ".lm-eval-venv" / "bin" / "python"
    return candidate if candidate.is_file() else None


def task_yaml(python: Path, dataset_dir: Path) -> str:
    """A task config: lm-eval's own gsm8k.yaml (by absolute path) on the staged train/test files."""
    probe = "import lm_eval, pathlib; print(pathlib.Path(lm_eval.__file__).parent / 'tasks/gsm8k/gsm8k.yaml')"
    found = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=False)
    if found.returncode != 0:
        raise UsageError(f"{python} cannot import lm_eval", "run scripts/install-lm-eval or fix $" + PYTHON_ENV)
    config = {
        "include": found.stdout.strip(),
        "task": TASK,
        "tag": [],
        "dataset_path": "json",
        "dataset_name": None,
        "dataset_kwargs": {
            "data_files": {split: str((dataset_dir / f"{split}.jsonl").resolve()) for split in ("train", "test")}
        },
    }
    return json.dumps(config, indent=2) + "\n"  # JSON is YAML


def run(
    python: Path,
    *,
    base_url: str,
    model: str,
    tokenizer: str,
    dataset_dir: Path,
    questions: int,
    shots: int,
    max_tokens: int,
    concurrency: int,
    work_dir: Path,
    timeout_s: float,
) -> list[dict[str, Any]]:
    """Run ``lm_eval`` against a server; per question: index, prompt_sha256, completion, strict and flexible
    extraction and exact-match verdicts, as lm-eval logged them."""
    task_dir = work_dir / "tasks"
    task_dir.mkdir(parents=True, exist_ok=True)
    (task_dir / f"{TASK}.yaml").write_text(task_yaml(python, dataset_dir), encoding="utf-8")
    model_args = (
        f"base_url={base_url}/v1/completions,model={model},tokenizer={tokenizer},tokenized_requests=False,"
        f"max_gen_toks={max_tokens},num_concurrent={concurrency}"
    )
    argv = [str(python), "-m", "lm_eval", "--model", "local-completions", "--model_args", model_args]
    argv += ["--tasks", TASK, "--include_path", str(task_dir), "--num_fewshot", str(shots), "--limit", str(questions)]
    argv += ["--log_samples", "--output_path", str(work_dir / "out")]
    env = {**os.environ, **OFFLINE_ENV, "HF_HOME": str(work_dir / "hf")}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout_s, check=False)
    samples = sorted((work_dir / "out").glob(f"**/samples_{TASK}_*.jsonl"))
    if done.returncode != 0 or not samples:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"lm_eval exited {done.returncode} without samples: {tail}")
    return read_samples(samples[-1])


def read_samples(path: Path) -> list[dict[str, Any]]:
    """Fold lm-eval's samples file (one row per document and filter) into one record per question."""
    by_doc: dict[int, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        record = by_doc.setdefault(
            int(row["doc_id"]),
            {"index": int(row["doc_id"]), "prompt_sha256": row["prompt_hash"], "completion": row["resps"][0][0]},
        )
        kind = "extracted" if row["filter"] == "strict-match" else "flexible"
        record[kind] = row["filtered_resps"][0]
        record["correct" if kind == "extracted" else "flexible_correct"] = row["exact_match"] == 1.0
    return [by_doc[i] for i in sorted(by_doc)]
