"""Decision -> steps: every branch validates against Buildkite's schema; the GPU step carries what it must."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from afd_e2e.errors import UsageError
from afd_e2e.pipeline.decide import BLOCK, EXPLAIN, GATES_CLOSED, OPEN_GATES, RUN, Decision, ProfileDecision
from afd_e2e.pipeline.generate import (
    DEFAULT_PLUGIN,
    GpuStepSettings,
    build_pipeline,
    step_slug,
)
from afd_e2e.pipeline.steps import render
from afd_e2e.profile import load_profile
from repo_paths import REPO

PROFILES = REPO / "python" / "afd_e2e" / "profiles"

GATES = {"AFD_E2E_BACKEND": "gpu", "AFD_E2E_LARGE_MODEL": "1", "AFD_GPU_E2E_MODEL": "/m", "AFD_E2E_DEVICES": "0,1"}
DECISIONS = {
    "explain": Decision(
        EXPLAIN,
        "pull request #12",
        ("AFD_E2E_LARGE_MODEL is not set; set AFD_E2E_LARGE_MODEL=1",),
        cause=GATES_CLOSED,
        remedy=OPEN_GATES,
    ),
    "run": Decision(RUN, "scheduled build", ("scheduled builds run unattended", "1 agent"), gate_env=GATES),
    "block": Decision(BLOCK, "manual build (ui)", ("a person confirms the run",), gate_env=GATES),
    "block, warned": Decision(
        BLOCK, "scheduled build", ("unblock only if...",), ("could not check: HTTP 401",), gate_env=GATES
    ),
    "block, teams": Decision(BLOCK, "pull request #13 from a fork", ("fork",), (), ("gpu-a", "gpu-b"), GATES),
}


@pytest.fixture(scope="module")
def qwen():
    return load_profile("qwen3.5-122b-a10b")


def group_for(profile, decision, reference="qwen3.5-122b-a10b", settings=None):
    pipeline = build_pipeline([ProfileDecision(reference, profile, decision)], settings or GpuStepSettings())
    (group,) = yaml.safe_load(render(pipeline))["steps"]
    return group


def steps_by_kind(group):
    return {
        ("block" if "block" in step else "gpu" if "plugins" in step else "annotation"): step for step in group["steps"]
    }


@pytest.mark.parametrize("name", DECISIONS)
def test_every_branch_validates(valid_pipeline, qwen, name):
    pipeline = build_pipeline([ProfileDecision("qwen3.5-122b-a10b", qwen, DECISIONS[name])], GpuStepSettings())
    valid_pipeline(yaml.safe_load(render(pipeline, "yaml")))


def test_explain_is_an_info_annotation_and_no_gpu_step(qwen):
    group = group_for(qwen, DECISIONS["explain"])
    (step,) = group["steps"]
    assert "agents" not in step and "plugins" not in step
    assert step["command"] == (
        "printenv AFD_E2E_ANNOTATION | buildkite-agent annotate --style info --context afd-e2e-qwen3-5-122b-a10b-info"
    )
    assert step["env"]["AFD_E2E_ANNOTATION"] == (
        "**afd-e2e qwen3.5-122b-a10b** is not run (pull request #12): its opt-in gates are closed; to open them, set "
        "the variables named here in the environment of `afd-e2e pipeline` (in Buildkite, the bootstrap step's env):"
        "\n\n"
        "- AFD_E2E_LARGE_MODEL is not set; set AFD_E2E_LARGE_MODEL=1"
    )


def test_nightly_is_the_gpu_step_alone(qwen):
    group = group_for(qwen, DECISIONS["run"])
    (gpu,) = group["steps"]
    assert gpu["agents"] == {"queue": "large-model", "gpus": "8"}
    assert gpu["plugins"] == [{DEFAULT_PLUGIN: {"profile": "qwen3.5-122b-a10b"}}]
    assert gpu["depends_on"] is None


def test_the_gpu_step(qwen):
    settings = GpuStepSettings(plugin="acme/afd-e2e#v9.9.9", timeout_in_minutes=480, priority=5)
    gpu = steps_by_kind(group_for(qwen, DECISIONS["run"], settings=settings))["gpu"]
    assert gpu == {
        "label": "afd-e2e qwen3.5-122b-a10b",
        "key": "afd-e2e-qwen3-5-122b-a10b-run",
        "depends_on": None,
        "agents": {"queue": "large-model", "gpus": "8"},
        "env": GATES,
        "plugins": [{"acme/afd-e2e#v9.9.9": {"profile": "qwen3.5-122b-a10b"}}],
        "timeout_in_minutes": 480,
        "priority": 5,
        "concurrency": 1,
        "concurrency_group": "afd-e2e/gpus=8,queue=large-model",
        "retry": {"automatic": [{"exit_status": -1, "limit": 1}]},
        "artifact_paths": ["afd-e2e-out/results.json", "afd-e2e-out/logs/**/*"],
    }


def test_block_then_run_with_a_choice_of_cases(qwen):
    kinds = steps_by_kind(group_for(qwen, DECISIONS["block"]))
    block, gpu = kinds["block"], kinds["gpu"]
    assert "annotation" not in kinds
    assert gpu["depends_on"] == [block["key"]]
    (field,) = block["fields"]
    assert field["multiple"] is True
    seed_cases = ["baseline-eager", "afd-eager-4a4f", "native-eager-dp8", "native-dp8-serving", "afd-4a4f-serving"]
    assert [o["value"] for o in field["options"]] == seed_cases
    assert field["default"] == seed_cases
    assert gpu["plugins"][0][DEFAULT_PLUGIN]["cases-meta-data"] == field["key"]
    assert "a person confirms the run" in block["prompt"]
    assert "gpus=8,queue=large-model" in block["prompt"]


def test_a_failed_agent_check_is_a_warning_annotation_and_in_the_prompt(qwen):
    kinds = steps_by_kind(group_for(qwen, DECISIONS["block, warned"]))
    assert "--style warning" in kinds["annotation"]["command"]
    assert "could not check: HTTP 401" in kinds["annotation"]["env"]["AFD_E2E_ANNOTATION"]
    assert "could not check: HTTP 401" in kinds["block"]["prompt"]


@pytest.mark.parametrize("name", DECISIONS)
def test_every_step_states_its_dependencies(qwen, name):
    """No step is held by a block it does not belong to (Buildkite's implicit dependencies)."""
    group = group_for(qwen, DECISIONS[name])
    assert group["depends_on"] is None
    block_keys = [step["key"] for step in group["steps"] if "block" in step]
    for step in group["steps"]:
        assert step["depends_on"] == (block_keys if "plugins" in step and block_keys else None)


def test_fork_blocks_are_restricted_to_the_teams(qwen):
    block = steps_by_kind(group_for(qwen, DECISIONS["block, teams"]))["block"]
    assert block["allowed_teams"] == ["gpu-a", "gpu-b"]


def test_the_plugin_loads_the_profile_as_given(qwen):
    gpu = steps_by_kind(group_for(qwen, DECISIONS["run"], reference="ci/profiles/qwen.yaml"))["gpu"]
    assert gpu["plugins"][0][DEFAULT_PLUGIN]["profile"] == "ci/profiles/qwen.yaml"


def test_several_profiles_have_distinct_keys(valid_pipeline, qwen):
    deepseek = load_profile("deepseek-v2-lite-2a2f")
    tiny = load_profile("tiny-cpu")
    pipeline = yaml.safe_load(
        render(
            build_pipeline(
                [
                    ProfileDecision("qwen3.5-122b-a10b", qwen, DECISIONS["block"]),
                    ProfileDecision("deepseek-v2-lite-2a2f", deepseek, DECISIONS["block, warned"]),
                    ProfileDecision("tiny-cpu", tiny, DECISIONS["run"]),
                ],
                GpuStepSettings(),
            )
        )
    )
    valid_pipeline(pipeline)
    keys = [group["key"] for group in pipeline["steps"]]
    keys += [step["key"] for group in pipeline["steps"] for step in group["steps"]]
    assert len(keys) == len(set(keys)) == 3 + 2 + 3 + 1
    groups = {group["key"]: steps_by_kind(group)["gpu"] for group in pipeline["steps"]}
    assert groups["afd-e2e-deepseek-v2-lite-2a2f"]["concurrency_group"] == "afd-e2e/gpus=4,queue=gpu-4"
    assert "agents" not in groups["afd-e2e-tiny-cpu"]
    assert groups["afd-e2e-tiny-cpu"]["concurrency_group"] == "afd-e2e/queue=default"


def test_a_profile_given_twice_is_refused(qwen, tmp_path):
    copy = tmp_path / "qwen.yaml"
    copy.write_text(PROFILES.joinpath("qwen3.5-122b-a10b.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    twice = [
        ProfileDecision("qwen3.5-122b-a10b", qwen, DECISIONS["run"]),
        ProfileDecision(str(copy), qwen, DECISIONS["run"]),
    ]
    with pytest.raises(
        UsageError, match=rf"profile qwen3.5-122b-a10b is given twice \('qwen3.5-122b-a10b' and '{copy}'\)"
    ):
        build_pipeline(twice, GpuStepSettings())


def test_profiles_whose_step_keys_collide_are_refused(qwen):
    other = dataclasses.replace(qwen, name="qwen3-5-122b-a10b")
    pair = [ProfileDecision("a", qwen, DECISIONS["run"]), ProfileDecision("b", other, DECISIONS["run"])]
    with pytest.raises(UsageError, match="share the step key afd-e2e-qwen3-5-122b-a10b"):
        build_pipeline(pair, GpuStepSettings())


@pytest.mark.parametrize(
    ("name", "slug"),
    [("qwen3.5-122b-a10b", "qwen3-5-122b-a10b"), ("my profile/v2", "my-profile-v2"), ("...", "profile")],
)
def test_step_slug(name, slug):
    assert step_slug(name) == slug
