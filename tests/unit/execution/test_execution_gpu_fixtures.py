"""Unit tier: the execution verdicts on a real H200 run (``tests/fixtures/execution/gpu``: vLLM 0.26 from the GPU
kit, the tiny DeepSeek-V2, native eager and native CUDA graphs FULL_DECODE_ONLY at 64, each with vLLM's torch
profiler; made by ``tests/gpu/test_execution_gpu.py`` with ``AFD_E2E_GPU_EXECUTION_OUT`` and trimmed by
``trim.py``): both proven from their own log and trace, and each contradicted when read against the other's claim.
"""

from __future__ import annotations

import json
from pathlib import Path

from afd_e2e.execution.asked import asked_of
from afd_e2e.execution.judge import judge_role
from afd_e2e.execution.startup import read_startup
from afd_e2e.execution.trace import read_traces
from afd_e2e.plan.model import RunPlan
from afd_e2e.results.codec import from_json
from afd_e2e.results.status import Proof
from repo_paths import FIXTURES

GPU = FIXTURES / "execution" / "gpu"


def _argv(case_id: str) -> list[str]:
    plan = from_json(RunPlan, json.loads((GPU / "plan.json").read_text(encoding="utf-8")))
    (process,) = next(c for c in plan.cases if c.id == case_id).processes
    return process.argv


def _evidence(case_id: str):
    log = f"{case_id}/server.log"
    startup = read_startup((GPU / log).read_text(encoding="utf-8"), log)
    trace: Path = GPU / case_id / "server.trace.json.gz"
    return startup, read_traces([trace], [f"{case_id}/server.trace.json.gz"])


def test_the_graph_case_replays_one_graph_in_every_decode_step_and_none_in_prefill():
    startup, runtime = _evidence("native-graph")
    proof, reason, _ = judge_role(asked_of(_argv("native-graph"), "cuda"), startup, runtime)
    assert proof is Proof.PROVEN, reason
    assert startup.graphs_captured and startup.engine_cudagraph_mode == "FULL_DECODE_ONLY"
    assert runtime.split and (runtime.decode.steps, runtime.decode.graph_launches) == (21, 21)
    assert (runtime.prefill.steps, runtime.prefill.graph_launches) == (3, 0)
    assert "decode: 21 steps, 21 graph launches (1.0 per step)" in reason


def test_the_eager_case_launches_kernels_and_no_graph():
    startup, runtime = _evidence("native-eager")
    proof, reason, _ = judge_role(asked_of(_argv("native-eager"), "cuda"), startup, runtime)
    assert proof is Proof.PROVEN, reason
    assert startup.eager and "Enforce eager set" in reason
    assert runtime.total.graph_launches == 0 and runtime.decode.steps == 21 and runtime.decode.kernel_launches > 0


def test_empty_steps_are_no_decode_steps():
    """vLLM 0.26 runs two empty steps (``execute_context_0(0)_generation_0(0)``) after each request; counted as decode
    steps they made the graph case's 21 replays look like 21 of 27 decode steps."""
    _, runtime = _evidence("native-graph")
    assert runtime.total.steps == runtime.decode.steps + runtime.prefill.steps == 24


def test_the_eager_run_contradicts_a_graph_claim():
    """The eager run's evidence read as if graphs had been asked: eager line and no graph launch in its decode steps."""
    startup, runtime = _evidence("native-eager")
    proof, reason, _ = judge_role(asked_of(_argv("native-graph"), "cuda"), startup, runtime)
    assert proof is Proof.CONTRADICTED
    assert "decode: 21 steps, 0 graph launches" in reason


def test_the_graph_run_contradicts_an_eager_claim():
    startup, runtime = _evidence("native-graph")
    proof, reason, _ = judge_role(asked_of(["--enforce-eager"], "cuda"), startup, runtime)
    assert proof is Proof.CONTRADICTED and "21 graph launches" in reason
