"""The workloads against the real vLLM on the CPU (tiny-cpu profile): GSM8K graded, the same verdicts as lm-eval
(when its venv is installed), parity between TP1 and TP2, and bench repetitions aggregated into a comparison.

Launches no server of its own: it reads the session's shared run (``tiny_cpu_run``, tests/shared_run.py), where
cpu-tp1 and cpu-tp2 each ran every phase on one real ``vllm serve`` of the tiny random-weight model, and lm-eval's
reference was asked of cpu-tp1's server while it was up (its ``probe`` phase).
"""

from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace

import pytest

from afd_e2e.profile import load_profile
from afd_e2e.profile.bench_spec import bench_spec
from afd_e2e.workloads.parity import parity_spec
from shared_run import PROFILE as SHARED_PROFILE

LAUNCHES = 0  # the most vLLM servers this module starts (tests/launch_counter.py): reads the session's shared run

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM (scripts/install-cpu-vllm)"),
]
PROFILE = load_profile("tiny-cpu")
PARITY = parity_spec(SHARED_PROFILE)  # the shared run's parity prompts (the parity test's)


@pytest.fixture(scope="module")
def measured(tiny_cpu_run):
    """Both cases as the shared run measured them; the lm-eval reference asked of cpu-tp1 (None without lm-eval)."""
    return SimpleNamespace(
        results=tiny_cpu_run.data["cases"],
        comparisons=tiny_cpu_run.data["comparisons"],
        reference=tiny_cpu_run.probed.lm_eval,
        out=tiny_cpu_run.out,
        lines=tiny_cpu_run.lines["cpu-tp1"],
    )


def test_phase_outcomes_passed(measured):
    for case_id in ("cpu-tp1", "cpu-tp2"):
        case = measured.results[case_id]
        assert case["status"] == "passed", case["failure"]
        assert {"correctness", "performance"} <= set(case["timings"]["phases"])
        assert (case["gsm8k"]["status"], case["performance"]["status"]) == ("passed", "passed")


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
        assert [o["prompt"] for o in outputs] == list(PARITY.prompts)
        assert all(o["error"] is None and o["token_ids"] and isinstance(o["text"], str) for o in outputs)


def test_bench_repetitions_pass_and_aggregate_into_a_comparison(measured):
    for case_id, case_results in measured.results.items():
        performance = case_results["performance"]
        assert performance["status"] == "passed", performance["failure"]
        assert [r["status"] for r in performance["repetitions"]] == ["passed"] * bench_spec(PROFILE).repetitions
        assert len(performance["warmups"]) == bench_spec(PROFILE).warmups
        for rep in performance["repetitions"]:
            assert rep["completed"] == bench_spec(PROFILE).num_prompts and (measured.out / rep["path"]).is_file()
        assert (measured.out / f"bench/{case_id}/warmup-1.json").is_file()
    comparison = measured.comparisons["tp1-vs-tp2"]
    assert (comparison["baseline_label"], comparison["candidate_label"]) == ("native DP1/TP1", "native DP1/TP2")
    parity = comparison["parity"]
    prompts = len(PARITY.prompts)
    assert parity["status"] == "passed" and parity["total"] == prompts
    assert parity["identical"] + parity["close"] == prompts and parity["different"] == 0
    performance = comparison["performance"]
    assert performance["status"] == "passed" and performance["control"] is False
    keys = {m["key"] for m in performance["metrics"]}
    assert {"request_throughput", "mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms", "p99_ttft_ms"} <= keys
    for metric in performance["metrics"]:
        assert len(metric["baseline"]["values"]) == len(metric["candidate"]["values"]) == 2
        assert metric["verdict"] in ("better", "worse", "parity", "inconclusive") and metric["ci95_pct"] is not None
        if metric["verdict"] == "inconclusive":  # two repetitions a side rarely decide: it says what would
            assert "margin" in metric["reason"], metric
