"""``afd-e2e pipeline`` end to end: environment and agents API in, a schema-valid pipeline (or a clear error) out."""

from __future__ import annotations

import json

import pytest
import yaml
from bk_support import AGENTS_LIST, agent
from bk_support import BUILD as BUILDKITE
from bk_support import QWEN_OPT_IN as OPT_IN

BUILD = {**BUILDKITE, "BUILDKITE_PULL_REQUEST": "false"}


@pytest.fixture
def generate(pipeline_cli, agents_api):
    agents_api.serve(AGENTS_LIST, [agent("gpu-1", "queue=large-model", "gpus=8")])
    return pipeline_cli


def pipeline_of(generated: tuple[int, str, str], valid_pipeline) -> tuple[dict, str]:
    code, out, err = generated
    assert code == 0, err
    pipeline = yaml.safe_load(out)
    valid_pipeline(pipeline)
    return pipeline, err


def gpu_steps(pipeline):
    return [step for group in pipeline["steps"] for step in group["steps"] if "plugins" in step]


def test_nightly_runs_on_the_large_model_queue(generate, valid_pipeline):
    variables = {**BUILD, **OPT_IN, "BUILDKITE_SOURCE": "schedule"}
    pipeline, err = pipeline_of(generate(variables, "--profile", "qwen3.5-122b-a10b"), valid_pipeline)
    (gpu,) = gpu_steps(pipeline)
    assert gpu["agents"] == {"queue": "large-model", "gpus": "8"}
    assert "afd-e2e pipeline: qwen3.5-122b-a10b: GPU step runs unattended (scheduled build of branch main):\n" in err
    assert "1 connected agent(s) have gpus=8, queue=large-model: gpu-1" in err


def test_a_manual_build_is_blocked(generate, valid_pipeline):
    variables = {**BUILD, **OPT_IN, "BUILDKITE_SOURCE": "ui"}
    generated = generate(variables, "--profile", "qwen3.5-122b-a10b", "--allowed-teams", "gpu")
    pipeline, _ = pipeline_of(generated, valid_pipeline)
    (group,) = pipeline["steps"]
    block, gpu = group["steps"]
    assert block["allowed_teams"] == ["gpu"]
    assert gpu["depends_on"] == [block["key"]]


def test_closed_gates_explain_and_the_log_says_why(generate, valid_pipeline, agents_api):
    generated = generate({**BUILD, "BUILDKITE_SOURCE": "schedule"}, "--profile", "qwen3.5-122b-a10b")
    pipeline, err = pipeline_of(generated, valid_pipeline)
    assert gpu_steps(pipeline) == []
    assert "AFD_E2E_BACKEND is not set; set AFD_E2E_BACKEND=gpu to opt in" in err
    assert agents_api.requests == []


def test_json_is_the_same_pipeline(generate):
    variables = {**BUILD, **OPT_IN, "BUILDKITE_SOURCE": "ui"}
    _, as_yaml, _ = generate(variables, "--profile", "qwen3.5-122b-a10b")
    code, as_json, _ = generate(variables, "--profile", "qwen3.5-122b-a10b", "--format", "json")
    assert code == 0
    assert json.loads(as_json) == yaml.safe_load(as_yaml)


def test_several_profiles_one_group_each(generate, valid_pipeline):
    variables = {**BUILD, **OPT_IN, "BUILDKITE_SOURCE": "schedule"}
    generated = generate(variables, "--profile", "qwen3.5-122b-a10b", "--profile", "tiny-cpu")
    pipeline, _ = pipeline_of(generated, valid_pipeline)
    assert [g["key"] for g in pipeline["steps"]] == ["afd-e2e-qwen3-5-122b-a10b", "afd-e2e-tiny-cpu"]
    assert len(gpu_steps(pipeline)) == 1
    assert (
        "AFD_E2E_BACKEND=gpu but profile tiny-cpu runs on cpu"
        in pipeline["steps"][1]["steps"][0]["env"]["AFD_E2E_ANNOTATION"]
    )


@pytest.mark.parametrize(
    ("variables", "args", "message"),
    [
        (
            {**OPT_IN, "AFD_E2E_DEVICES": "0,1"},
            [],
            "error: profile qwen3.5-122b-a10b: AFD_E2E_DEVICES='0,1' lists 2 devices",
        ),
        (OPT_IN, ["--plugin", "acme/afd-e2e"], "error: --plugin=acme/afd-e2e has no version (fix: pin one, e.g."),
        (OPT_IN, ["--timeout-in-minutes", "0"], "error: --timeout-in-minutes=0 is not positive"),
        (
            OPT_IN,
            ["--profile", "qwen3.5-122b-a10b"],
            "error: profile qwen3.5-122b-a10b is given twice ('qwen3.5-122b-a10b' and 'qwen3.5-122b-a10b')",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(generate, variables, args, message):
    code, out, err = generate({**BUILD, **variables}, "--profile", "qwen3.5-122b-a10b", *args)
    assert code == 2
    assert out == ""
    assert f"afd-e2e pipeline: {message}" in err
    assert len(err.strip().splitlines()) == 1


def test_a_multi_agent_profile_is_a_leader_when_both_pools_have_agents(pipeline_cli, agents_api, valid_pipeline):
    variables = {**BUILD, **OPT_IN, "BUILDKITE_SOURCE": "schedule"}
    agents_api.serve(AGENTS_LIST, [agent("gpu-1", "queue=large-model", "gpus=8")])
    pipeline, err = pipeline_of(pipeline_cli(variables, "--profile", "qwen3.5-122b-a10b-two-agents"), valid_pipeline)
    assert gpu_steps(pipeline) == []
    assert (
        "no connected agent has gpus=8, queue=large-model-ffn (1 connected agents checked) (the follower pool of case afd-8a8f: ffn)"
        in err
    )

    agents_api.serve(
        AGENTS_LIST, [agent(f"gpu-{q}", f"queue={q}", "gpus=8") for q in ("large-model", "large-model-ffn")]
    )
    pipeline, err = pipeline_of(pipeline_cli(variables, "--profile", "qwen3.5-122b-a10b-two-agents"), valid_pipeline)
    (leader,) = gpu_steps(pipeline)
    assert leader["label"] == "afd-e2e qwen3.5-122b-a10b-two-agents (leader)"
    assert leader["concurrency_group"] == "afd-e2e/gpus=8,queue=large-model + gpus=8,queue=large-model-ffn"
