"""GPU tier: dual-batch overlap proven, or contradicted, from each role's own log on a real engine (the tiny
DeepSeek-V2 on the kit's vLLM 0.26, two GPUs, two native eager DBO cases through ``afd-e2e run``; issue 42 part 2).

Both ask ``dbo: {decode_token_threshold: 2, prefill_token_threshold: 8}`` (the plugin's own runner's thresholds) and
run the smoke and a bench of 24 prompts at 12 at a time (the plugin's DBO load: batches large enough to split),
each with the profile's model runner, V1 (vLLM 0.26's V2 runner does not do DBO):

- ``dbo-dp1`` (DP1 on GPU 0, no expert parallelism): vLLM 0.26 splits a batch only when every DP rank agrees, and at
  DP 1 never (``coordinate_batch_across_dp`` returns early), so its steps run unsplit: ``contradicted``, failing the
  case;
- ``dbo-dp2`` (DP2 on GPUs 0 and 1, no expert parallelism): the ranks agree on large batches: ``proven`` on both
  ranks (not run yet: no 2-GPU machine was lent on 12-06).

Each case is a run of its own, so the DP1 one runs where one GPU is lent. ``AFD_E2E_GPU_DBO_OUT=DIR`` keeps each
run's results folder in ``DIR/<case>`` (the unit tier's fixture comes from it). One model load each. Skips, with the
reason, without the GPUs a case needs or ``AFD_GPU_E2E_MODEL``.
"""

from __future__ import annotations

import os
import shutil

import pytest
import yaml

from afd_e2e.results import load_results
from afd_e2e.results.status import Proof, Status
from gpu_agent import REPO, afd_e2e, why_not_gpus

pytestmark = pytest.mark.gpu

PROFILE = REPO / "python/afd_e2e/profiles/tiny-gpu-1a1f.yaml"
DBO = {"decode_token_threshold": 2, "prefill_token_threshold": 8}


def _document(case_id: str) -> dict:
    document = yaml.safe_load(PROFILE.read_text(encoding="utf-8"))
    document.update(
        name="tiny-gpu-dbo",
        description="SMOKE on real GPUs: tiny random DeepSeek-V2, native DBO at DP1 and DP2, micro-batches proven",
        software={**document["software"], "afd_plugin": False},
    )
    # vLLM 0.26 refuses DBO unless --all2all-backend names a DeepEP or NIXL backend (preflight says so first), and
    # the kit has neither's kernels; without expert parallelism the MoE never uses the backend, so the cases start
    native = {
        "kind": "native",
        "phases": ["smoke", "performance"],
        "dbo": DBO,
        "add_args": ["--all2all-backend=deepep_low_latency"],
    }
    cases = {
        "dbo-dp1": {**native, "topology": {"devices": "attention", "dp": 1, "tp": 1, "ep": False}},
        "dbo-dp2": {**native, "topology": {"devices": "all", "dp": 2, "tp": 1, "ep": False}},
    }
    document["cases"] = {case_id: cases[case_id]}
    if case_id == "dbo-dp1":  # one GPU is all it needs
        document.update(
            hardware={**document["hardware"], "gpus": 1},
            agent_tags={**document["agent_tags"], "gpus": "1"},
            devices={"count": 1, "default": [0], "groups": {"attention": [0, 1]}},
        )
    document["comparisons"] = {}
    bench = document["workloads"]["bench"]
    bench.update(input_len=64, output_len=32, num_prompts=24, max_concurrency=12, warmups=0, repetitions=1)
    bench["request_rate"] = 100  # all 24 at once, 12 in flight: batches large enough to split
    document["workloads"] = {"smoke": document["workloads"]["smoke"], "bench": bench}
    return document


def _run(tmp_path_factory, case_id: str, gpus: int):
    if reason := why_not_gpus(gpus):
        pytest.skip(reason)
    if not os.environ.get("AFD_GPU_E2E_MODEL"):
        pytest.skip("AFD_GPU_E2E_MODEL is not set")
    out = tmp_path_factory.mktemp(case_id)
    profile = tmp_path_factory.mktemp("profile") / f"tiny-gpu-{case_id}.yaml"
    profile.write_text(yaml.safe_dump(_document(case_id), sort_keys=False), encoding="utf-8")
    devices = ",".join(str(d) for d in range(gpus))
    done = afd_e2e("run", "--profile", str(profile), "--out", str(out), timeout=900, devices=devices)
    if keep := os.environ.get("AFD_E2E_GPU_DBO_OUT"):
        shutil.copytree(out, f"{keep}/{case_id}", dirs_exist_ok=True)
    return done.returncode, load_results(out)


@pytest.fixture(scope="module")
def dp1(tmp_path_factory):
    return _run(tmp_path_factory, "dbo-dp1", 1)


@pytest.fixture(scope="module")
def dp2(tmp_path_factory):
    return _run(tmp_path_factory, "dbo-dp2", 2)


def _role(results, case_id: str):
    (role,) = results.case(case_id).section("execution").roles
    print(case_id, role.proof, role.reason, role.microbatches, sep="\n  ")
    return role


def test_dp1_asked_dbo_and_ran_unsplit_so_it_is_contradicted_and_fails(dp1):
    code, results = dp1
    role = _role(results, "dbo-dp1")
    assert role.asked.dbo and role.proof is Proof.CONTRADICTED, role.reason
    counts = role.microbatches
    assert counts.started and sum(counts.unsplit.values()) > 0 and not any(counts.split.values()), counts
    assert "DBO: ran unsplit after start-up" in role.reason and "ubatch_slices: None" in role.reason
    case = results.case("dbo-dp1")
    assert case.status is Status.FAILED and case.failure.startswith("execution: server role asked"), case.failure
    assert code == 1


def test_dp2_split_its_batches_on_both_ranks_and_is_proven(dp2):
    _, results = dp2
    role = _role(results, "dbo-dp2")
    assert role.asked.dbo and role.proof is Proof.PROVEN, role.reason
    counts = role.microbatches
    assert len(counts.split) == 2 and all(n > 0 for n in counts.split.values()), counts
    assert "UBatchSlice(" in counts.split_line
    assert results.case("dbo-dp2").status is Status.PASSED, results.case("dbo-dp2").failure
