"""GPU tier: the model runner, matched across a comparison on a real engine (the tiny DeepSeek-V2 on the kit's
vLLM 0.26, one GPU, three smoke-only eager cases through ``afd-e2e run``).

- ``native-v1``: the profile's runner (V1, ``VLLM_USE_V2_MODEL_RUNNER=0``);
- ``native-auto``: ``model_runner: auto``, vLLM's own choice, which for ``DeepseekV2ForCausalLM`` is V2: the 12-05
  situation (a V2 baseline against V1 candidates), so ``v1-vs-auto`` must fail, naming both runners and the fix;
- ``native-v2``: ``model_runner: v2`` declared, so ``v1-vs-v2`` is a declared difference and passes.

Three model loads. Skips, with the reason, without a GPU or ``AFD_GPU_E2E_MODEL``.
"""

from __future__ import annotations

import os

import pytest
import yaml

from afd_e2e.results import load_results
from afd_e2e.results.status import Proof, Status
from gpu_agent import REPO, afd_e2e, why_not_gpus

pytestmark = pytest.mark.gpu

PROFILE = REPO / "python/afd_e2e/profiles/tiny-gpu-1a1f.yaml"


def _document() -> dict:
    document = yaml.safe_load(PROFILE.read_text(encoding="utf-8"))
    document.update(
        name="tiny-gpu-model-runner",
        description="SMOKE on real GPUs: tiny random DeepSeek-V2, one native case per model runner on 1 GPU",
        hardware={**document["hardware"], "gpus": 1},
        agent_tags={**document["agent_tags"], "gpus": "1"},
        software={**document["software"], "afd_plugin": False},
        devices={"count": 1, "default": [0], "groups": {"attention": [0, 1]}},
    )
    native = {"kind": "native", "phases": ["smoke"], "topology": {"devices": "attention", "dp": 1, "tp": 1}}
    document["cases"] = {
        "native-v1": native,
        "native-auto": {"extends": "native-v1", "model_runner": "auto"},
        "native-v2": {"extends": "native-v1", "model_runner": "v2"},
    }
    document["comparisons"] = {
        "v1-vs-auto": {"baseline": "native-v1", "candidate": "native-auto", "measures": []},
        "v1-vs-v2": {"baseline": "native-v1", "candidate": "native-v2", "measures": []},
    }
    document["workloads"] = {"smoke": document["workloads"]["smoke"]}
    return document


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if reason := why_not_gpus(1):
        pytest.skip(reason)
    if not os.environ.get("AFD_GPU_E2E_MODEL"):
        pytest.skip("AFD_GPU_E2E_MODEL is not set")
    out = tmp_path_factory.mktemp("model-runner-gpu")
    profile = tmp_path_factory.mktemp("profile") / "tiny-gpu-model-runner.yaml"
    profile.write_text(yaml.safe_dump(_document(), sort_keys=False), encoding="utf-8")
    done = afd_e2e("run", "--profile", str(profile), "--out", str(out), timeout=1200, devices="0")
    return done.returncode, load_results(out)


def _runner(results, case_id: str):
    (role,) = results.case(case_id).section("execution").roles
    print(case_id, role.asked.model_runner, role.startup.model_runner, role.proof, role.reason, sep="  ")
    return role


def test_each_case_ran_the_runner_it_asked_and_records_it(run):
    _, results = run
    for case_id, asked, shown in (("native-v1", "v1", "v1"), ("native-auto", None, "v2"), ("native-v2", "v2", "v2")):
        role = _runner(results, case_id)
        assert (role.asked.model_runner, role.startup.model_runner) == (asked, shown), role.startup.lines
        assert role.proof is Proof.PROVEN and results.case(case_id).status is Status.PASSED


def test_a_comparison_across_runners_fails_unless_declared(run):
    code, results = run
    undeclared = results.comparisons["v1-vs-auto"].model_runners
    assert undeclared.status is Status.FAILED, undeclared
    assert undeclared.text.startswith("model runners differ: baseline V1, candidate V2; fix: set engine.model_runner")
    declared = results.comparisons["v1-vs-v2"].model_runners
    assert declared.status is Status.PASSED and declared.declared, declared
    assert results.verdict.status is Status.FAILED and code == 1
    assert "v1-vs-auto model runners: failed: model runners differ: baseline V1, candidate V2" in "\n".join(
        results.verdict.reasons
    )
