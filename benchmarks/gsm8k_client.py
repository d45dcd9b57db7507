"""GSM8K-7 eight-shot wall time: the built-in evaluator vs lm-eval's own gsm8k task, same real CPU vLLM server.

    PYTHONPATH=python .venv/bin/python benchmarks/gsm8k_client.py [--port 19540] [--questions 7 --shots 8]

Starts one ``vllm serve`` of the tiny model (``.tiny-model``, built if missing), then times, in one invocation:
the built-in evaluator at concurrency 1 and at one request per question, and ``lm_eval`` (its venv from
scripts/install-lm-eval or $AFD_E2E_LM_EVAL_PYTHON; skipped with a note when absent). Both run the same
prompts against the same server; every run's per-question verdicts must equal lm-eval's. Target: >= 3x faster.
Eight-shot prompts exceed the tiny model's 2048 positions with its small tokenizer, so the server runs with
--max-model-len 8192 (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1); random weights make accuracy meaningless (~0).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import requests

from afd_e2e.profile import Gsm8kSpec
from afd_e2e.system.executables import resolve_executable
from afd_e2e.system.ports import busy_ports
from afd_e2e.tiny_model import build_tiny_model
from afd_e2e.workloads import gsm8k, gsm8k_eval, lm_eval_reference

REPO = Path(__file__).resolve().parents[1]
SERVED = "tiny-moe"
SERVER_ENV = {
    "VLLM_HOST_IP": "127.0.0.1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
}
VERDICT_KEYS = ("index", "prompt_sha256", "completion", "extracted", "flexible", "correct", "flexible_correct")


@contextmanager
def server(model: Path, port: int, work: Path):
    if busy_ports([port]):
        sys.exit(f"port {port} is busy: pass --port")
    env = {**os.environ, **SERVER_ENV, **{k: str(work) for k in ("TMPDIR", "VLLM_RPC_BASE_PATH", "VLLM_CACHE_ROOT")}}
    argv = [resolve_executable("vllm"), "serve", str(model), "--served-model-name", SERVED, "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--enforce-eager", "--dtype", "bfloat16", "--max-model-len", "8192", "--seed", "0"]
    with (work / "server.log").open("wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"server did not come up: see {work / 'server.log'}")
            try:
                if requests.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(1)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def builtin(base_url: str, model: Path, args: argparse.Namespace, concurrency: int, work: Path) -> tuple[float, list]:
    """Wall time of the built-in evaluator from the staged files to graded records."""
    spec = Gsm8kSpec(args.questions, args.shots, args.max_tokens, concurrency, 0, "AFD_E2E_GSM8K_DIR", False)
    started = time.perf_counter()
    data = gsm8k.load_dataset(args.dataset)
    questions = gsm8k.build_questions(data["test"], data["train"], args.questions, args.shots)
    path = work / f"builtin-c{concurrency}.jsonl"
    section = gsm8k_eval.evaluate(
        spec=spec,
        questions=questions,
        base_url=base_url,
        model=SERVED,
        stop=gsm8k.stop_sequences(gsm8k.eos_text(model)),
        records_path=path,
        records_rel=path.name,
        publish=lambda _: None,
        progress=lambda _: None,
        cancelled=threading.Event(),
        heartbeat_s=10.0,
    )
    elapsed = time.perf_counter() - started
    if section["status"] != "passed":
        sys.exit(f"built-in evaluator failed: {section['failure']}")
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
    with tempfile.TemporaryDirectory(prefix="gsm8k-bench-") as tmp, server(model, args.port, Path(tmp)) as base_url:
        work = Path(tmp)
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
