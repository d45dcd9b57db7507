"""GSM8K-7 eight-shot wall time: the built-in evaluator vs lm-eval's own gsm8k task, same real CPU vLLM server.

    PYTHONPATH=python:tests .venv/bin/python benchmarks/gsm8k_client.py [--port 19540] [--questions 7 --shots 8]

Starts one ``vllm serve`` of the tiny model (``.tiny-model``, built if missing), then times, in one invocation:
the built-in evaluator at concurrency 1 and at one request per question, and ``lm_eval`` (its venv from
scripts/install-lm-eval or $AFD_E2E_LM_EVAL_PYTHON; skipped with a note when absent). Both run the same
prompts against the same server; every run's per-question verdicts must equal lm-eval's. Target: >= 3x faster.
Eight-shot prompts exceed the tiny model's 2048 positions with its small tokenizer, so the server runs with
--max-model-len 8192 (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1); random weights make accuracy meaningless (~0).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import lm_eval_reference  # tests/lm_eval_reference.py: test and benchmark support, not part of the package
from afd_e2e.phases import builtin, gsm8k_task
from afd_e2e.phases.gsm8k import Gsm8kSpec, evaluate
from afd_e2e.plan import CasePlan, build_plan
from afd_e2e.profile import load_profile
from afd_e2e.results.status import Status
from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.server import CaseServers
from afd_e2e.tiny_model import build_tiny_model

builtin.install_phases()  # the built-in phases, which reading a profile needs (as cli.main installs them)

REPO = Path(__file__).resolve().parents[1]
PROFILE = load_profile("tiny-cpu")
SERVED = PROFILE.model.served_name
VERDICT_KEYS = ("index", "prompt_sha256", "completion", "extracted", "flexible", "correct", "flexible_correct")


def long_context_case(model: Path, port: int) -> CasePlan:
    """tiny-cpu's cpu-tp1 as planned, with room for eight-shot prompts (past the model's 2048 positions)."""
    case = build_plan(PROFILE, model_path=str(model), case_ids=["cpu-tp1"], port_base=port).cases[0]
    (process,) = case.processes
    process = dataclasses.replace(
        process,
        argv=(*process.argv, "--max-model-len", "8192"),
        env_set={**process.env_set, "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"},
    )
    return dataclasses.replace(case, processes=(process,))


def builtin(base_url: str, model: Path, args: argparse.Namespace, concurrency: int, work: Path) -> tuple[float, list]:
    """Wall time of the built-in evaluator from the staged files to graded records."""
    spec = Gsm8kSpec(args.questions, args.shots, args.max_tokens, concurrency, 0, "AFD_E2E_GSM8K_DIR", False)
    started = time.perf_counter()
    data = gsm8k_task.load_dataset(args.dataset)
    questions = gsm8k_task.build_questions(data["test"], data["train"], args.questions, args.shots)
    path = work / f"builtin-c{concurrency}.jsonl"
    section = evaluate(
        spec=spec,
        questions=questions,
        base_url=base_url,
        model=SERVED,
        stop=gsm8k_task.stop_sequences(gsm8k_task.eos_text(model)),
        records_path=path,
        records_rel=path.name,
        publish=lambda _: None,
        progress=lambda _: None,
        cancelled=threading.Event(),
        heartbeat_s=10.0,
        request_timeout_s=600.0,
    )
    elapsed = time.perf_counter() - started
    if section.status is not Status.PASSED:
        sys.exit(f"built-in evaluator failed: {section.failure}")
    return elapsed, [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def print_first_difference(name: str, records: list, reference: list) -> None:
    for mine, theirs in zip(records, reference, strict=True):
        for key in VERDICT_KEYS:
            if mine[key] != theirs[key]:
                print(
                    f"  {name}: question {mine['index']} differs in {key}: {mine[key]!r:.200} vs lm-eval {theirs[key]!r:.200}"
                )
                return


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=19540)
    parser.add_argument("--questions", type=int, default=7)
    parser.add_argument("--shots", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=512)
    shared = Path(os.environ.get("AFD_E2E_SHARED", REPO.parent / "shared"))
    parser.add_argument("--dataset", type=Path, default=shared / "datasets" / "gsm8k", help="staged GSM8K folder")
    args = parser.parse_args()
    model = build_tiny_model(REPO / ".tiny-model")
    lm_eval_python = lm_eval_reference.find_python(REPO)
    case = long_context_case(model, args.port)
    base_url = case.base_url
    with (
        tempfile.TemporaryDirectory(prefix="gsm8k-bench-") as tmp,
        CaseServers(case, Path(tmp) / "logs", scratch=Path(tmp) / "scratch", cache=Path(tmp) / ".cache") as servers,
    ):
        work = Path(tmp)
        servers.launch()
        servers.wait_ready(CancelFlag())
        print(f"GSM8K-{args.questions} {args.shots}-shot, max_tokens {args.max_tokens}, tiny model on the CPU vLLM")
        builtin(base_url, model, args, 1, work)  # warm the server's first-request paths for a fair first timing
        runs = {f"built-in, concurrency {c}": builtin(base_url, model, args, c, work) for c in (1, args.questions)}
        reference = None
        if lm_eval_python is None:
            print("lm-eval: not installed (scripts/install-lm-eval); built-in figures only")
        else:
            started = time.perf_counter()
            reference = lm_eval_reference.run(
                lm_eval_python,
                base_url=base_url,
                model=SERVED,
                tokenizer=str(model),
                dataset_dir=args.dataset,
                questions=args.questions,
                shots=args.shots,
                max_tokens=args.max_tokens,
                concurrency=1,
                work_dir=work / "lm-eval",
                timeout_s=900,
            )
            runs["lm-eval 0.4.13, num_concurrent 1"] = (time.perf_counter() - started, reference)
    baseline = runs.get("lm-eval 0.4.13, num_concurrent 1", (None, None))[0]
    identical = True
    for name, (seconds, records) in runs.items():
        same = reference is None or [{k: r[k] for k in VERDICT_KEYS} for r in records] == [
            {k: r[k] for k in VERDICT_KEYS} for r in reference
        ]
        identical &= same
        if not same:
            print_first_difference(name, records, reference)
        ratio = f"{baseline / seconds:5.1f}x vs lm-eval" if baseline else ""
        correct = sum(r["correct"] for r in records)
        print(f"  {name:34s} {seconds:7.2f} s  {ratio}  strict {correct}/{len(records)}  verdicts identical: {same}")
    if baseline:
        best = min(seconds for name, (seconds, _) in runs.items() if name.startswith("built-in"))
        print(f"target >= 3x faster: {'met' if baseline / best >= 3 else 'NOT met'} ({baseline / best:.1f}x)")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
