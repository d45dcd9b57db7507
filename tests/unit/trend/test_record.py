"""What a run contributes: its values per case and metric, and the identity runs are grouped by."""

from __future__ import annotations

import copy
import json

import pytest

from afd_e2e.results.store import results_from_json
from afd_e2e.trend.record import BuildRef, hardware_identity, profile_revision, run_point
from fixtures.trend.make_history import REAL_RUNS

REAL = json.loads((REAL_RUNS[0] / "results.json").read_text())


def typed(data: dict):
    return results_from_json(data)


def test_values_are_each_metrics_mean_over_passed_repetitions_and_the_case_timings():
    values = run_point(typed(REAL), BuildRef("x")).values
    reps = REAL["cases"]["cpu-tp2"]["performance"]["repetitions"]
    assert values[("cpu-tp2", "mean_ttft_ms")] == pytest.approx(sum(r["metrics"]["mean_ttft_ms"] for r in reps) / 2)
    assert values[("cpu-tp1", "ready_s")] == REAL["cases"]["cpu-tp1"]["timings"]["launch_to_ready_s"]
    gsm8k = REAL["cases"]["cpu-tp1"]["gsm8k"]
    assert values[("cpu-tp1", "gsm8k_strict_match")] == gsm8k["correct"] / gsm8k["total"]
    assert len(values) == 18


def test_a_failed_repetition_does_not_count():
    results = copy.deepcopy(REAL)
    reps = results["cases"]["cpu-tp1"]["performance"]["repetitions"]
    reps[1]["status"] = "failed"
    assert (
        run_point(typed(results), BuildRef("x")).values[("cpu-tp1", "mean_e2el_ms")]
        == reps[0]["metrics"]["mean_e2el_ms"]
    )


def test_the_revision_ignores_model_path_and_ports_but_not_serve_arguments():
    moved = copy.deepcopy(REAL)
    moved["plan"]["model_path"] = "/elsewhere/model"
    for case in moved["plan"]["cases"]:
        for process in case["processes"]:
            old = str(process["api_port"])
            process["api_port"] += 1000
            process["argv"] = [
                "/elsewhere/model" if a == REAL["plan"]["model_path"] else str(process["api_port"]) if a == old else a
                for a in process["argv"]
            ]
        case["base_url"] = case["ready_url"] = "http://127.0.0.1:1"
    assert profile_revision(typed(moved)) == profile_revision(typed(REAL))
    changed = copy.deepcopy(REAL)
    changed["plan"]["cases"][0]["processes"][0]["argv"].append("--max-num-seqs=8")
    assert profile_revision(typed(changed)) != profile_revision(typed(REAL))


def test_hardware_is_gpu_model_count_and_driver_major():
    assert hardware_identity(typed(REAL)) == "cpu"
    gpus = [{"index": i, "name": "NVIDIA H200", "memory_total_mib": 143771} for i in range(8)]
    on_gpus = {**REAL, "environment": {**REAL["environment"], "gpus": gpus, "driver": "580.95.05"}}
    assert hardware_identity(typed(on_gpus)) == "8x NVIDIA H200, driver 580"
    on_gpus["environment"]["driver"] = "580.65.06"
    assert hardware_identity(typed(on_gpus)) == "8x NVIDIA H200, driver 580"
