"""GPU tier: native eager vs native CUDA graphs on one GPU (the tiny DeepSeek-V2 on the kit's vLLM 0.26), each with
the profiler phase (vLLM's own torch profiler, ``/start_profile`` .. ``/stop_profile``), through ``afd-e2e run``;
both cases' execution must be ``proven`` from their own evidence: the eager case by vLLM's eager lines and no
graph launch in its trace, the graph case by its capture lines and graph launches in its decode steps (the profiler at its default schedule: its window on decode steps). Both run
the profile's model runner (V1 by default, which vLLM 0.26 would not pick for DeepSeek-V2 on its own), read from
their logs, and the comparison between them records it.

Two model loads. Skips, with the reason, without a GPU or ``AFD_GPU_E2E_MODEL``. ``AFD_E2E_GPU_EXECUTION_OUT``
keeps the results folder, which ``tests/fixtures/execution/trim.py`` trims into ``tests/fixtures/execution/gpu``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from afd_e2e.results import load_results
from afd_e2e.results.status import Proof, Status
from gpu_agent import REPO, afd_e2e, why_not_gpus

pytestmark = pytest.mark.gpu

PROFILE = REPO / "python/afd_e2e/profiles/tiny-gpu-1a1f.yaml"
PROFILER = {"wait_s": 60}  # the default schedule (wait 2, warmup 1, active 4): its active window holds decode steps


def _document() -> dict:
    document = yaml.safe_load(PROFILE.read_text(encoding="utf-8"))
    document.update(
        name="tiny-gpu-execution",
        description="SMOKE on real GPUs: tiny random DeepSeek-V2, native eager vs CUDA graph on 1 GPU",
        hardware={**document["hardware"], "gpus": 1},
        agent_tags={**document["agent_tags"], "gpus": "1"},
        software={**document["software"], "afd_plugin": False},
        devices={"count": 1, "default": [0], "groups": {"attention": [0, 1]}},
        # no measure: the comparison records only which model runner each side ran (``model_runners``)
        comparisons={"eager-vs-graph": {"baseline": "native-eager", "candidate": "native-graph", "measures": []}},
    )
    native = {"kind": "native", "topology": {"devices": "attention", "dp": 1, "tp": 1, "ep": True}}
    document["cases"] = {
        "native-eager": {**native, "phases": ["smoke", "profiler"], "profiler": PROFILER},
        "native-graph": {"extends": "native-eager", "graph": {"capture_size": 64}},
    }
    document["workloads"] = {"smoke": document["workloads"]["smoke"]}
    return document


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if reason := why_not_gpus(1):
        pytest.skip(reason)
    if not os.environ.get("AFD_GPU_E2E_MODEL"):
        pytest.skip("AFD_GPU_E2E_MODEL is not set")
    kept = os.environ.get("AFD_E2E_GPU_EXECUTION_OUT")
    out = Path(kept) if kept else tmp_path_factory.mktemp("execution-gpu")
    profile = tmp_path_factory.mktemp("profile") / "tiny-gpu-execution.yaml"
    profile.write_text(yaml.safe_dump(_document(), sort_keys=False), encoding="utf-8")
    afd_e2e("run", "--profile", str(profile), "--out", str(out), timeout=1200, devices="0")
    return load_results(out)


def _role(results, case_id: str):
    case = results.case(case_id)
    section = case.section("execution")
    assert section is not None, f"{case_id}: no execution section ({case.status}: {case.failure})"
    (role,) = section.roles
    print(case_id, role.proof, role.reason, *(role.startup.lines if role.startup else []), sep="\n  ")
    return case, role


def test_native_eager_is_proven_eager_with_no_graph_launch(run):
    case, role = _role(run, "native-eager")
    assert role.asked.mode == "eager" and role.proof is Proof.PROVEN, role.reason
    assert role.runtime is not None and role.runtime.split and role.runtime.decode.steps > 0
    assert role.runtime.total.graph_launches == 0 and role.runtime.decode.kernel_launches > 0
    assert case.status is Status.PASSED, case.failure


def test_native_graph_is_proven_with_graph_launches_in_decode_steps(run):
    case, role = _role(run, "native-graph")
    assert role.asked.mode == "cuda graphs" and role.proof is Proof.PROVEN, role.reason
    assert role.startup is not None and role.startup.graphs_captured
    decode = role.runtime.decode
    assert decode.steps > 0 and decode.graph_launches == decode.steps  # every decode step replays one graph
    assert role.runtime.prefill.graph_launches == 0  # FULL_DECODE_ONLY: prefill steps run eager
    assert case.status is Status.PASSED, case.failure


def test_both_sides_ran_the_runner_the_profile_asks_and_the_comparison_says_so(run):
    for case_id in ("native-eager", "native-graph"):
        _, role = _role(run, case_id)
        assert role.asked.model_runner == "v1" and role.startup.model_runner == "v1", role.startup.lines
    runners = run.comparisons["eager-vs-graph"].model_runners
    assert runners is not None and runners.status is Status.PASSED, runners
    assert runners.text == "both sides ran model runner V1"
