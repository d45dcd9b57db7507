"""The AFD plugin's GPU feature matrix on real GPUs: `afd-e2e run --profile tiny-gpu-features` (AFD 1A1F eager with
profiler and serving checks, its CUDA-graph and DBO variants, native DP1 for native vs AFD parity).

Skips, with the reason, unless this machine has 2 NVIDIA GPUs, a CUDA vLLM, the AFD plugin registered as the vLLM
general plugin ``afd`` and the tiny DeepSeek-V2 in ``AFD_GPU_E2E_MODEL`` (no GSM8K needed). ``AFD_E2E_GPU_OUT``
keeps the results folder (default: a temporary one).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from gpu_agent import afd_e2e, why_not_two_gpu_afd

pytestmark = pytest.mark.gpu

PROFILE = "tiny-gpu-features"
RUN_BUDGET_S = 9 * 60  # four model loads: the whole run must stay short

REASON = why_not_two_gpu_afd("AFD_GPU_E2E_MODEL")
if REASON:
    pytest.skip(REASON, allow_module_level=True)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = Path(os.environ.get("AFD_E2E_GPU_OUT") or tmp_path_factory.mktemp("tiny-gpu-features"))
    assert afd_e2e("preflight", "--profile", PROFILE, timeout=120).returncode == 0, "preflight: the agent does not fit"
    started = time.monotonic()
    afd_e2e("run", "--profile", PROFILE, "--out", str(out), timeout=1500)
    return out, time.monotonic() - started, json.loads((out / "results.json").read_text())


def test_verdict_passes_within_the_budget(run):
    _, seconds, results = run
    assert results["verdict"]["status"] == "passed", results["verdict"]["reasons"]
    assert seconds < RUN_BUDGET_S, f"the run took {seconds:.0f} s"


def test_four_loads_each_ready_and_clean(run):
    results = run[2]
    assert list(results["cases"]) == ["native-dp1", "afd-1a1f", "afd-1a1f-graph", "afd-1a1f-dbo"]
    for case_id, case in results["cases"].items():
        assert case["status"] == "passed", (case_id, case.get("failure"))
        checks = {c["check"]: c["status"] for c in case["hygiene"]}
        for name in ("processes", "ports", "gpu_memory", "forced_kill", "leftover_files"):
            assert checks[name] == "passed", (case_id, name, case["hygiene"])


def test_graph_and_dbo_launched_with_their_flags(run):
    cases = run[2]["cases"]
    graph = cases["afd-1a1f-graph"]["processes"][1]["argv"]
    assert "--enforce-eager" not in graph and "--cudagraph-capture-sizes=64" in graph
    assert "--enable-dbo" in cases["afd-1a1f-dbo"]["processes"][1]["argv"]


def test_eager_graph_and_dbo_agree_and_replay_at_the_capture_batch(run):
    comparisons = run[2]["comparisons"]
    assert comparisons["native-vs-afd"]["parity"]["status"] == "passed"
    for comparison in ("eager-vs-graph", "eager-vs-dbo"):
        for measure in ("parity", "replay"):
            assert comparisons[comparison][measure]["status"] == "passed", (comparison, measure)
    replay = run[2]["cases"]["afd-1a1f-graph"]["replay"]
    assert (replay["rounds"], replay["batch"], replay["answered"]) == (3, 64, 192)


def test_dbo_throughput_side_by_side(run):
    metrics = {m["key"] for m in run[2]["comparisons"]["eager-vs-dbo"]["performance"]["metrics"]}
    assert {"request_throughput", "output_throughput"} <= metrics


def test_each_role_wrote_a_profiler_trace_and_the_annotation_links_it(run):
    out, _, results = run
    profiler = results["cases"]["afd-1a1f"]["profiler"]
    assert [(r["role"], r["status"]) for r in profiler["roles"]] == [("ffn", "passed"), ("attention", "passed")]
    uploaded = [t["path"] for t in profiler["traces"] if t["uploaded"]]
    assert uploaded and all((out / path).stat().st_size > 0 for path in uploaded)
    assert any(path.startswith("traces/afd-1a1f/attention/") for path in uploaded)
    assert f"artifact://{uploaded[0]}" in (out / "annotation.md").read_text()


def test_serving_checks_each_pass(run):
    checks = {c["check"]: c["status"] for c in run[2]["cases"]["afd-1a1f"]["serving"]["checks"]}
    assert checks == {"completion": "passed", "usage": "passed", "unknown_model": "passed", "concurrent": "passed"}
