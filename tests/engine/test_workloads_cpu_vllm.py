"""The workloads against the real vLLM on the CPU (tiny-cpu profile): GSM8K graded, the same verdicts as lm-eval
(when its venv is installed), parity between TP1 and TP2, and bench repetitions aggregated into a comparison.

One server at a time: cpu-tp1 first, then cpu-tp2; each is a real ``vllm serve`` of the tiny random-weight model
built into the repository's ``.tiny-model``, launched from the plan's own argv and environment.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

import lm_eval_reference
from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.results.codec import to_json
from afd_e2e.results.model import SCHEMA, RunResults
from afd_e2e.results.status import Status
from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.case import new_case_results
from afd_e2e.runner.server import CaseServers
from afd_e2e.system.child_env import client_environment
from afd_e2e.system.markers import marker_env
from afd_e2e.workloads.context import PhaseOutcome
from afd_e2e.workloads.phases import compare, run_correctness, run_performance
from repo_paths import GSM8K_DIR, REPO

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM (scripts/install-cpu-vllm)"),
]
PORT_BASE = 19500  # this module's ports: 19500 (cpu-tp1), 19520 (cpu-tp2)
PROFILE = load_profile("tiny-cpu")


def _ctx(case, out_dir: Path, lines: list[str]) -> SimpleNamespace:
    return SimpleNamespace(
        profile=PROFILE,
        case=case,
        case_results=new_case_results(case),
        out_dir=out_dir,
        gsm8k_dir=GSM8K_DIR,
        progress=lines.append,
        cancelled=threading.Event(),
        flush=lambda: None,
        client_env=lambda name: client_environment(os.environ, markers=marker_env("workloads", case.id, name)),
        take_forensics=lambda _trigger, _reason: None,  # no case servers here to dump
        diagnose=lambda: "",  # no watchdog here: a budget timeout says only what the workload saw
    )


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Both cases measured in turn; the lm-eval reference run on cpu-tp1 while it is up (None without lm-eval)."""
    from afd_e2e.tiny_model import build_tiny_model

    model = build_tiny_model(REPO / ".tiny-model")
    work = tmp_path_factory.mktemp("workloads-cpu")
    plan = build_plan(PROFILE, model_path=str(model), port_base=PORT_BASE)
    lines: list[str] = []
    run = RunResults(SCHEMA, PROFILE.name, plan.platform, plan.smoke_only, Status.RUNNING, "2026-01-01", plan)
    results, outcomes, reference = {}, {}, None
    lm_eval_python = lm_eval_reference.find_python(REPO)
    for case in plan.cases:
        ctx = _ctx(case, work / "out", lines)
        with CaseServers(
            case, work / "logs" / case.id, scratch=work / "scratch" / case.id, cache=work / ".cache"
        ) as up:
            up.launch()
            up.wait_ready(CancelFlag())
            outcomes[case.id] = {"correctness": run_correctness(ctx)}
            if case.id == "cpu-tp1" and lm_eval_python is not None:
                spec = PROFILE.gsm8k
                reference = lm_eval_reference.run(
                    lm_eval_python,
                    base_url=case.base_url,
                    model=case.served_model_name,
                    tokenizer=str(model),
                    dataset_dir=GSM8K_DIR,
                    questions=spec.questions,
                    shots=spec.shots,
                    max_tokens=spec.max_tokens,
                    concurrency=1,
                    work_dir=work / "lm-eval",
                    timeout_s=300,
                )
            outcomes[case.id]["performance"] = run_performance(ctx)
        run.cases[case.id] = ctx.case_results
        results[case.id] = to_json(ctx.case_results)
    return SimpleNamespace(
        plan=plan, run=run, results=results, outcomes=outcomes, reference=reference, out=work / "out", lines=lines
    )


def test_phase_outcomes_passed(measured):
    expected = PhaseOutcome(Status.PASSED)
    assert measured.outcomes == {c: {"correctness": expected, "performance": expected} for c in ("cpu-tp1", "cpu-tp2")}


def test_gsm8k_runs_and_grades(measured):
    section = measured.results["cpu-tp1"]["gsm8k"]
    assert section["status"] == "passed", section["failure"]  # min_correct 0: random weights score ~0
    assert section["total"] == len(section["questions"]) == 3 and section["accuracy_meaningful"] is False
    records = (measured.out / section["records"]).read_text(encoding="utf-8").splitlines()
    assert len(records) == 3
    for question in section["questions"]:
        assert len(question["prompt_sha256"]) == 64 and question["gold"] and question["extracted"]
    assert any(line.startswith("gsm8k: 3/3 answered") for line in measured.lines)


def test_builtin_verdicts_identical_to_lm_eval_on_the_same_server(measured):
    if measured.reference is None:
        pytest.skip("lm-eval not installed: scripts/install-lm-eval or AFD_E2E_LM_EVAL_PYTHON")
    section = measured.results["cpu-tp1"]["gsm8k"]
    builtin = [json.loads(line) for line in (measured.out / section["records"]).read_text().splitlines()]
    keys = ("index", "prompt_sha256", "completion", "extracted", "flexible", "correct", "flexible_correct")
    assert [{k: r[k] for k in keys} for r in builtin] == [{k: r[k] for k in keys} for r in measured.reference]


def test_parity_outputs_measured_on_each_case(measured):
    for case_id in ("cpu-tp1", "cpu-tp2"):
        assert measured.results[case_id]["parity_records"] == f"parity/{case_id}.jsonl"
        records = (measured.out / f"parity/{case_id}.jsonl").read_text(encoding="utf-8").splitlines()
        outputs = [json.loads(line) for line in records]
        assert [o["prompt"] for o in outputs] == list(PROFILE.parity.prompts)
        assert all(o["error"] is None and o["token_ids"] and isinstance(o["text"], str) for o in outputs)


def test_bench_repetitions_pass_and_aggregate_into_a_comparison(measured):
    for case_id, case_results in measured.results.items():
        performance = case_results["performance"]
        assert performance["status"] == "passed", performance["failure"]
        assert [r["status"] for r in performance["repetitions"]] == ["passed"] * PROFILE.bench.repetitions
        assert len(performance["warmups"]) == PROFILE.bench.warmups
        for rep in performance["repetitions"]:
            assert rep["completed"] == PROFILE.bench.num_prompts and (measured.out / rep["path"]).is_file()
        assert (measured.out / f"bench/{case_id}/warmup-1.json").is_file()
    comparisons = to_json(compare(PROFILE, measured.run, measured.out))
    comparison = comparisons["tp1-vs-tp2"]
    assert (comparison["baseline_label"], comparison["candidate_label"]) == ("native DP1/TP1", "native DP1/TP2")
    parity = comparison["parity"]
    assert parity["status"] == "passed" and parity["total"] == 3
    assert parity["identical"] + parity["close"] == 3 and parity["different"] == 0
    performance = comparison["performance"]
    assert performance["status"] == "passed" and performance["control"] is False
    keys = {m["key"] for m in performance["metrics"]}
    assert {"request_throughput", "mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms", "p99_ttft_ms"} <= keys
    for metric in performance["metrics"]:
        assert len(metric["baseline"]["values"]) == len(metric["candidate"]["values"]) == 2
        assert metric["verdict"] in ("better", "worse", "parity", "inconclusive") and metric["ci95_pct"] is not None
        if metric["verdict"] == "inconclusive":  # two repetitions a side rarely decide: it says what would
            assert "margin" in metric["reason"], metric
