"""Unit tier: a pull request's GPU cap (``afd-e2e pipeline --pr-max-gpus N``) on the shipped profiles: cases over the
cap are left out of the block and named with their GPU counts on the build page; a profile with no case under the
cap is explained, not run; scheduled builds are never capped."""

from __future__ import annotations

import pytest
import yaml
from bk_support import AGENTS_LIST, BUILD, agent

from afd_e2e.buildkite.env import BuildEnv
from afd_e2e.pipeline.agents import FOUND, AgentAvailability
from afd_e2e.pipeline.decide import BLOCK, EXPLAIN, OVER_PR_CAP, RUN, decide
from afd_e2e.profile import load_profile

GATES = {"AFD_E2E_BACKEND": "gpu", "AFD_GPU_E2E_MODEL": "/m", "AFD_E2E_DEVICES": "0,1,2,3"}
PR = {
    "BUILDKITE_SOURCE": "webhook",
    "BUILDKITE_PULL_REQUEST": "12",
    "BUILDKITE_PULL_REQUEST_REPO": BUILD["BUILDKITE_REPO"],
}
NIGHTLY = {"BUILDKITE_SOURCE": "schedule", "BUILDKITE_PULL_REQUEST": "false"}
POOLS = [agent("gpu2-a", "queue=gpu-2", "gpus=2"), agent("gpu4-a", "queue=gpu-4", "gpus=4")]
LEFT_OUT = "uses 4 GPUs and a pull request runs cases of at most 2 (--pr-max-gpus); scheduled and manual builds run it"


@pytest.fixture
def generate(pipeline_cli, agents_api, valid_pipeline):
    def run(variables, *args):
        agents_api.serve(AGENTS_LIST, POOLS)
        code, out, err = pipeline_cli({**BUILD, **GATES, **variables}, *args)
        assert code == 0, err
        pipeline = yaml.safe_load(out)
        valid_pipeline(pipeline)
        return pipeline, err

    return run


def test_a_pull_request_leaves_out_the_cases_over_its_cap_and_says_which_and_why(generate):
    pipeline, err = generate(PR, "--profile", "deepseek-v2-lite-2a2f", "--pr-max-gpus", "2")
    (group,) = pipeline["steps"]
    info, block, gpu = group["steps"]
    body = info["env"]["AFD_E2E_ANNOTATION"]
    assert info["label"] == ":information_source: afd-e2e deepseek-v2-lite-2a2f: 2 case(s) left out"
    assert f"- **deepseek-v2-lite-2a2f**: case afd-2a2f is left out: it {LEFT_OUT}" in body
    assert f"- **deepseek-v2-lite-2a2f**: case native-dp4-ep4 is left out: it {LEFT_OUT}" in body
    (cases,) = block["fields"]
    assert [option["value"] for option in cases["options"]] == ["native-dp2-ep2"] == cases["default"]
    assert f"case afd-2a2f is left out: it {LEFT_OUT}" in block["prompt"]
    assert gpu["depends_on"] == [block["key"]]
    assert f"  - case afd-2a2f is left out: it {LEFT_OUT}\n" in err  # the bootstrap step's log says it too


def test_a_nightly_is_not_capped(generate):
    pipeline, _ = generate(NIGHTLY, "--profile", "deepseek-v2-lite-2a2f", "--pr-max-gpus", "2")
    ((gpu,),) = [group["steps"] for group in pipeline["steps"]]
    ((config,),) = [plugin.values() for plugin in gpu["plugins"]]
    assert config == {"profile": "deepseek-v2-lite-2a2f"}  # no block, no case list: every case, unattended


def test_a_profile_with_no_case_under_the_cap_is_explained_without_asking_for_agents():
    asked = []

    def lookup(tags):
        asked.append(tags)
        return AgentAvailability(FOUND, "1 agent")

    env = BuildEnv.from_environ({**BUILD, **GATES, **PR})
    decision = decide(env, load_profile("deepseek-v2-lite-tp2"), lookup, pr_max_gpus=2)
    assert (decision.action, decision.cause, asked) == (EXPLAIN, OVER_PR_CAP, [])
    assert decision.reasons == (
        f"case afd-tp2 is left out: it {LEFT_OUT}",
        f"case afd-tp2-graph is left out: it {LEFT_OUT}",
    )
    assert "raise --pr-max-gpus" in decision.headline()
    assert decide(env, load_profile("deepseek-v2-lite-tp2"), lookup, pr_max_gpus=4).action == BLOCK
    nightly = BuildEnv.from_environ({**BUILD, **GATES, **NIGHTLY})
    assert decide(nightly, load_profile("deepseek-v2-lite-tp2"), lookup, pr_max_gpus=2).action == RUN


def test_a_profile_set_on_a_pull_request_offers_only_the_cases_under_its_cap(generate):
    pipeline, _ = generate(PR, "--profile-set", "afd-plugin-gpu", "--pr-max-gpus", "2")
    (group,) = pipeline["steps"]
    steps = {step.get("key"): step for step in group["steps"]}
    explained = steps["afd-e2e-set-afd-plugin-gpu-info"]["env"]["AFD_E2E_ANNOTATION"]
    assert f"**deepseek-v2-lite-tp2**: {OVER_PR_CAP}: case afd-tp2 is left out" in explained
    left_out = steps["afd-e2e-set-afd-plugin-gpu-left-out-info"]["env"]["AFD_E2E_ANNOTATION"]
    assert f"- **deepseek-v2-lite-2a2f**: case afd-2a2f is left out: it {LEFT_OUT}" in left_out
    (cases,) = steps["afd-e2e-set-afd-plugin-gpu-approve"]["fields"]
    offered = [option["value"] for option in cases["options"]]
    assert "deepseek-v2-lite-2a2f/native-dp2-ep2" in offered and "tiny-gpu-1a1f/afd-1a1f" in offered
    assert not [value for value in offered if value.endswith(("/afd-2a2f", "/native-dp4-ep4", "/afd-tp2"))]


def test_a_negative_cap_is_a_one_line_error(pipeline_cli):
    code, out, err = pipeline_cli({**BUILD, **GATES, **PR}, "--profile", "tiny-gpu-1a1f", "--pr-max-gpus", "-1")
    assert (code, out) == (2, "")
    assert "afd-e2e pipeline: error: --pr-max-gpus=-1 is negative (fix: give a GPU count >= 0)" in err
