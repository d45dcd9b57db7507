"""The whole product on real GPUs: preflight, then `afd-e2e run --profile tiny-gpu-1a1f` (native vs AFD 1A1F on a
tiny random DeepSeek-V2, CUDA vLLM 0.26 + the AFD plugin), all phases, hygiene and reports.

Skips, with the reason, unless this machine has 2 NVIDIA GPUs, a CUDA vLLM, the AFD plugin registered as the vLLM
general plugin ``afd``, the checkpoint in ``AFD_GPU_E2E_MODEL`` and staged GSM8K data in ``AFD_E2E_GSM8K_DIR``.
``AFD_E2E_GPU_OUT`` keeps the results folder (default: a temporary one). See docs/agents.md, "Real GPUs".
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpu_agent import afd_e2e, why_not_two_gpu_afd

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
PROFILE = "tiny-gpu-1a1f"


REASON = why_not_two_gpu_afd("AFD_GPU_E2E_MODEL", "AFD_E2E_GSM8K_DIR")
if REASON:
    pytest.skip(REASON, allow_module_level=True)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = Path(os.environ.get("AFD_E2E_GPU_OUT") or tmp_path_factory.mktemp("tiny-gpu"))
    assert afd_e2e("preflight", "--profile", PROFILE, timeout=120).returncode == 0, "preflight: the agent does not fit"
    afd_e2e("run", "--profile", PROFILE, "--out", str(out), timeout=1500)
    return out


@pytest.fixture(scope="module")
def results(run_dir) -> dict:
    return json.loads((run_dir / "results.json").read_text())


def test_verdict_passes(results):
    assert results["verdict"]["status"] == "passed", results["verdict"]["reasons"]


def test_every_case_ready_and_clean(results):
    assert set(results["cases"]) == {"native-dp1", "afd-1a1f", "native-dp2-ep2"}
    for case_id, case in results["cases"].items():
        assert case["status"] == "passed", (case_id, case.get("failure"))
        assert case["timings"]["launch_to_ready_s"] > 0
        assert all(p["exit_code"] is not None and not p["forced_kill"] for p in case["processes"]), case_id
        checks = {c["check"]: c for c in case["hygiene"]}
        for name in ("processes", "ports", "gpu_memory", "forced_kill", "leftover_files"):
            assert checks[name]["status"] == "passed", (case_id, checks[name])


def test_afd_case_runs_both_roles_ffn_first(results):
    names = [p["name"] for p in results["cases"]["afd-1a1f"]["processes"]]
    assert names == ["ffn", "attention"]


def test_native_and_afd_outputs_agree_by_logprob_closeness(results, run_dir):
    parity = results["comparisons"]["correctness"]["parity"]
    assert parity["status"] == "passed" and parity["different"] == 0, parity
    assert parity["mode"] == "logprobs" and parity["identical"] + parity["close"] == parity["total"] == 4
    for case_id in ("native-dp1", "afd-1a1f"):
        records = (run_dir / results["cases"][case_id]["parity_records"]).read_text().splitlines()
        for output in map(json.loads, records):
            assert len(output["top_logprobs"]) == len(output["token_ids"]) > 0, (case_id, output["prompt"])


@pytest.fixture(scope="module")
def cudagraph_results(tmp_path_factory) -> dict:
    """Native DP1 vs AFD 1A1F parity with CUDA graphs (FULL_DECODE_ONLY): bf16 kernels may order near-ties
    differently, which closeness passes and exact-token parity would not."""
    import yaml

    work = tmp_path_factory.mktemp("tiny-gpu-cudagraph")
    document = yaml.safe_load((REPO / "python/afd_e2e/profiles" / f"{PROFILE}.yaml").read_text())
    engine = document["engine"]
    engine["serve_args"] = [arg for arg in engine["serve_args"] if arg != "--enforce-eager"]
    engine["serve_args"].append('--compilation-config={"cudagraph_mode":"FULL_DECODE_ONLY"}')
    for case_id in ("native-dp1", "afd-1a1f"):
        document["cases"][case_id]["phases"] = ["smoke", "correctness"]
    document["comparisons"] = {  # parity only: these two cases run no bench here
        key: comparison for key, comparison in document["comparisons"].items() if comparison["measures"] == ["parity"]
    }
    profile = work / "tiny-gpu-1a1f-cudagraph.yaml"
    profile.write_text(yaml.safe_dump(document))
    out = Path(os.environ.get("AFD_E2E_GPU_CUDAGRAPH_OUT") or work / "out")
    afd_e2e(
        "run", "--profile", str(profile), "--case", "native-dp1", "--case", "afd-1a1f", "--out", str(out), timeout=1500
    )
    return json.loads((out / "results.json").read_text())


def test_cuda_graph_parity_passes_by_closeness_and_shows_where(cudagraph_results):
    parity = cudagraph_results["comparisons"]["correctness"]["parity"]
    print({p["prompt"]: (p["verdict"], p["first_diff_token"]) for p in parity["prompts"]})
    assert parity["status"] == "passed" and parity["different"] == 0, parity
    for prompt in parity["prompts"]:
        if prompt["verdict"] == "close":  # where exact tokens differ: both tokens in each other's top-k
            assert prompt["baseline"]["other_in_top_k"] and prompt["candidate"]["other_in_top_k"], prompt


def test_performance_compared_on_equal_hardware(results):
    performance = results["comparisons"]["performance"]["performance"]
    keys = {m["key"] for m in performance["metrics"]}
    assert {"request_throughput", "output_throughput", "mean_ttft_ms", "mean_tpot_ms"} <= keys
    for side in ("native-dp2-ep2", "afd-1a1f"):
        reps = results["cases"][side]["performance"]["repetitions"]
        assert reps and all(r["status"] == "passed" for r in reps), side


def test_reports_rendered(run_dir):
    assert (run_dir / "annotation.md").read_text().strip()
    assert list((run_dir / "junit").glob("*.xml"))
    assert list((run_dir / "plots").glob("*.png"))


def test_the_run_recorded_its_preflight_with_the_link_matrix(results):
    preflight = results["preflight"]
    assert preflight["status"] == "passed" and preflight["seconds"] < 1.0, preflight
    assert preflight["hardware"]["matrix"][1][2] == preflight["hardware"]["links"][0]["label"] != "?"
    assert preflight["software"]["vllm"].startswith("0.26.0") and preflight["software"]["afd_plugin"]
    assert {c["status"] for c in preflight["checks"]} <= {"passed", "warned", "skipped"}
