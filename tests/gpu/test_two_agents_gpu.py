"""A case across two agents on real GPUs (tiny-gpu-1a1f's tiny DeepSeek-V2 on vLLM 0.26), both "agents" on this
host over 127.0.0.1 (``tests/two_agents_support.py``: the leader ``afd-e2e run``, the follower ``afd-e2e join``, the
buildkite-agent stub's shared store), each against the same case on one agent by the parity rule:

- ``one_gpu``: the native DP1 server in a follower job on GPU 0, smoke and the parity prompts from the leader,
  after the same case wholly on the leader (GPU 0 too, one case at a time);
- ``two_gpus``: AFD 1A1F with the FFN in a follower job on GPU 1 and Attention on the leader's GPU 0, after the
  single-agent AFD 1A1F on both.

    AFD_GPU_E2E_MODEL=/tmp/vl/tiny-dsv2 PYTHONPATH=python:tests:$PYTHONPATH \\
        python3 -m pytest tests/gpu/test_two_agents_gpu.py -v -s -m gpu -k one_gpu

Skips, with the reason, without the GPUs, a ``vllm`` executable, the checkpoint or (two_gpus) the AFD plugin.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from gpu_agent import REPO, why_not_gpus, why_not_kit, why_not_two_gpu_afd
from two_agents_support import FOLLOWER_AGENT, LEADER_AGENT, Build, finish

pytestmark = pytest.mark.gpu

MODEL = os.environ.get("AFD_GPU_E2E_MODEL", "/tmp/vl/tiny-dsv2")
PROFILE = REPO / "python/afd_e2e/profiles/tiny-gpu-1a1f.yaml"
PORT_BASE = 18800
ON_LOOPBACK = {"interface": "lo", "listen": "127.0.0.1"}


def _profile(tmp_path: Path, *, one_gpu: bool) -> tuple[Path, str, str]:
    """tiny-gpu-1a1f cut to a case and its twin placed on a follower pool (profile path, placed case, process)."""
    document = yaml.safe_load(PROFILE.read_text(encoding="utf-8"))
    document["engine"]["interface"] = "lo"
    document["workloads"].pop("gsm8k")  # parity is the gate here: random weights make GSM8K meaningless
    document["engine"]["env"]["set"]["VLLM_HOST_IP"] = "127.0.0.1"
    follower_pool = {"queue": "gpu-follower", "gpus": "1"}
    if one_gpu:
        document["name"] = "tiny-gpu-two-agents-1gpu"
        document["hardware"]["gpus"] = 1
        document["agent_tags"]["gpus"] = "1"
        document["devices"] = {"count": 1, "default": [0], "groups": {"attention": [0, 1]}}
        local, placed, process = "native-dp1", "native-dp1-remote", "server"
        placement = {process: {"agents": follower_pool, **ON_LOOPBACK, "devices": [0]}}
    else:
        document["name"] = "tiny-gpu-two-agents-2gpu"
        local, placed, process = "afd-1a1f", "afd-1a1f-remote", "ffn"
        placement = {process: {"agents": follower_pool, **ON_LOOPBACK, "devices": [1]}}
    case = {**document["cases"][local], "phases": ["smoke", "correctness"]}
    role = "topology" if one_gpu else process  # a placed role's devices are its own agent's (placement.devices)
    twin = {**case, role: {k: v for k, v in case[role].items() if k != "devices"}, "placement": placement}
    document["cases"] = {local: case, placed: twin}
    document["comparisons"] = {"across-agents": {"baseline": local, "candidate": placed, "measures": ["parity"]}}
    path = tmp_path / f"{document['name']}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path, placed, process


def _run(tmp_path: Path, *, one_gpu: bool) -> tuple[dict, Build, str]:
    profile, placed, process = _profile(tmp_path, one_gpu=one_gpu)
    env = {
        "AFD_E2E_BACKEND": "gpu",
        "AFD_GPU_E2E_MODEL": MODEL,
        "AFD_E2E_DEVICES": "0" if one_gpu else "0,1",
    }
    build = Build(tmp_path, profile, case=placed, process=process, port_base=PORT_BASE, env=env)
    try:
        leader, follower = build.start(waiting_s=900)  # the single-agent twin runs first
        assert finish(leader, 1200, build) == 0, build.outputs()
        assert finish(follower, 120, build) == 0, build.outputs()
    finally:
        build.end()  # nothing of a failed run left holding the GPU for the next test
    return json.loads(build.leader_results.read_text(encoding="utf-8")), build, placed


def _check(results: dict, build: Build, placed: str, process: str, device: int) -> None:
    assert results["verdict"]["status"] == "passed", results["verdict"]
    parity = results["comparisons"]["across-agents"]["parity"]
    assert parity["status"] == "passed", parity  # the same outputs, by the parity rule, across agents as on one
    case = results["cases"][placed]
    remote = next(p for p in case["processes"] if p["name"] == process)
    assert remote["agent"] == FOLLOWER_AGENT and remote["env"]["CUDA_VISIBLE_DEVICES"] == str(device), remote
    follower_checks = {c["check"]: c["status"] for c in case["hygiene"] if c["agent"] == FOLLOWER_AGENT}
    assert follower_checks["gpu_memory"] == "passed" and follower_checks["forced_kill"] == "passed", case["hygiene"]
    same = [c for c in results["preflight"]["checks"] if c["name"].startswith("same software")]
    assert same and all(c["status"] == "passed" for c in same), same
    build.nothing_left()


def test_one_gpu_native_server_on_a_follower_agrees_with_the_same_case_on_one_agent(tmp_path):
    if reason := why_not_gpus(1) or why_not_kit(MODEL):
        pytest.skip(reason)
    results, build, placed = _run(tmp_path, one_gpu=True)
    _check(results, build, placed, "server", 0)


def test_two_gpus_afd_1a1f_with_its_ffn_on_a_follower_agrees_with_afd_1a1f_on_one_agent(tmp_path):
    if reason := why_not_two_gpu_afd() or why_not_kit(MODEL):
        pytest.skip(reason)
    results, build, placed = _run(tmp_path, one_gpu=False)
    _check(results, build, placed, "ffn", 1)
    attention = next(p for p in results["cases"][placed]["processes"] if p["name"] == "attention")
    assert attention["agent"] == LEADER_AGENT and attention["env"]["CUDA_VISIBLE_DEVICES"] == "0", attention
