"""Profile sets: resolved by glob over shipped names, selected into agent pools (pure), rendered as one group with one
block for all the cases and one GPU step per pool, and run by the plugin's hooks from the block's choice."""

from __future__ import annotations

import dataclasses
import subprocess

import jsonschema
import pytest
import yaml
from bk_support import AGENTS_LIST, BUILD, QWEN_OPT_IN, REPO, FakeAgent, agent

from afd_e2e.buildkite.env import BuildEnv
from afd_e2e.errors import UsageError
from afd_e2e.pipeline.agents import FOUND, AgentAvailability
from afd_e2e.pipeline.decide import (
    BLOCK,
    EXPLAIN,
    GATES_CLOSED,
    NO_AGENT,
    OPEN_GATES,
    RUN,
    Decision,
    ProfileDecision,
    decide,
)
from afd_e2e.pipeline.generate import DEFAULT_PLUGIN, GpuStepSettings, build_pipeline, step_slug
from afd_e2e.pipeline.pools import select_pools
from afd_e2e.pipeline.profile_sets import resolve_profile_set
from afd_e2e.pipeline.steps import render
from afd_e2e.profile import builtin_profiles, load_profile

TINY = load_profile("tiny-gpu-1a1f")
LITE = load_profile("deepseek-v2-lite-2a2f")
# Profiles shipped later (issue 16) join the set by name alone; here they are copies of today's.
TINY_FEATURES = dataclasses.replace(TINY, name="tiny-gpu-features")
LITE_TP2 = dataclasses.replace(LITE, name="deepseek-v2-lite-tp2")
GATES = {"AFD_E2E_BACKEND": "gpu", "AFD_GPU_E2E_MODEL": "/m"}
PLUGIN_CONFIGURATION = yaml.safe_load((REPO / "plugin.yml").read_text(encoding="utf-8"))["configuration"]


def decided(profile, action, *reasons, warnings=(), cause="", remedy=""):
    decision = Decision(action, "manual build (ui)", reasons, warnings, (), GATES, cause, remedy)
    return ProfileDecision(profile.name, profile, decision)


def test_a_set_is_globs_over_shipped_names_so_later_profiles_join_it():
    shipped = [
        "deepseek-v2-lite-2a2f",
        "deepseek-v2-lite-features",
        "deepseek-v2-lite-tp2",
        "qwen3.5-122b-a10b",
        "tiny-cpu",
        "tiny-gpu-1a1f",
        "tiny-gpu-features",
    ]
    assert resolve_profile_set("afd-plugin-gpu", shipped) == (
        "deepseek-v2-lite-2a2f",
        "deepseek-v2-lite-features",
        "deepseek-v2-lite-tp2",
        "tiny-gpu-1a1f",
        "tiny-gpu-features",
    )
    assert {"tiny-gpu-1a1f", "deepseek-v2-lite-2a2f"} <= set(resolve_profile_set("afd-plugin-gpu", builtin_profiles()))


@pytest.mark.parametrize(
    ("name", "shipped", "message"),
    [
        ("nope", ["tiny-cpu"], "unknown profile set 'nope' (fix: use one of: afd-plugin-gpu)"),
        ("afd-plugin-gpu", ["tiny-cpu"], "profile set afd-plugin-gpu (tiny-gpu-*, deepseek-v2-lite-*) matches no"),
    ],
)
def test_a_set_that_names_nothing_is_an_error(name, shipped, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        resolve_profile_set(name, shipped)


def test_pools_group_the_profiles_to_run_by_agent_tags_and_keep_the_others():
    items = [
        decided(TINY, BLOCK, "a person confirms"),
        decided(LITE, EXPLAIN, "no connected agent has gpus=4, queue=gpu-4", cause=NO_AGENT),
        decided(TINY_FEATURES, BLOCK, "a person confirms"),
        decided(LITE_TP2, RUN, "scheduled"),
    ]
    selection = select_pools(items)
    assert [i.profile.name for i in selection.explained] == ["deepseek-v2-lite-2a2f"]
    assert [(p.tags_text, p.action, [m.profile.name for m in p.members]) for p in selection.pools] == [
        ("gpus=2,queue=gpu-2", BLOCK, ["tiny-gpu-1a1f", "tiny-gpu-features"]),
        ("gpus=4,queue=gpu-4", RUN, ["deepseek-v2-lite-tp2"]),
    ]
    assert [p.tags_text for p in selection.blocked] == ["gpus=2,queue=gpu-2"]


def set_pipeline(items):
    return yaml.safe_load(render(build_pipeline([], GpuStepSettings(), [("afd-plugin-gpu", items)])))


def test_the_set_is_one_group_one_block_and_one_gpu_step_per_pool(valid_pipeline):
    items = [
        decided(TINY, BLOCK, "a person confirms", warnings=("could not check: HTTP 401",)),
        decided(TINY_FEATURES, BLOCK, "a person confirms", warnings=("could not check: HTTP 401",)),
        decided(LITE, EXPLAIN, "AFD_E2E_LARGE_MODEL is not set", cause=GATES_CLOSED, remedy=OPEN_GATES),
        decided(LITE_TP2, RUN, "scheduled"),
    ]
    pipeline = set_pipeline(items)
    valid_pipeline(pipeline)
    (group,) = pipeline["steps"]
    assert group["key"] == "afd-e2e-set-afd-plugin-gpu"
    info, warning, block, pair, single = group["steps"]

    assert (
        f"**deepseek-v2-lite-2a2f**: {GATES_CLOSED}: AFD_E2E_LARGE_MODEL is not set"
        in info["env"]["AFD_E2E_ANNOTATION"]
    )
    assert "could not check: HTTP 401" in warning["env"]["AFD_E2E_ANNOTATION"]
    (field,) = block["fields"]
    values = [o["value"] for o in field["options"]]
    assert values == [f"{p}/{c.id}" for p in ("tiny-gpu-1a1f", "tiny-gpu-features") for c in TINY.cases]
    assert field["default"] == values
    assert "tiny-gpu-1a1f, tiny-gpu-features on an agent with gpus=2,queue=gpu-2" in block["prompt"]

    pair_config = pair["plugins"][0][DEFAULT_PLUGIN]
    assert pair_config == {"profile": ["tiny-gpu-1a1f", "tiny-gpu-features"], "cases-meta-data": field["key"]}
    assert pair["depends_on"] == [block["key"]]
    assert pair["agents"] == {"gpus": "2", "queue": "gpu-2"}
    assert pair["concurrency_group"] == "afd-e2e/gpus=2,queue=gpu-2"
    assert pair["artifact_paths"] == ["afd-e2e-out/*/results.json", "afd-e2e-out/*/logs/**/*"]

    assert single["plugins"][0][DEFAULT_PLUGIN] == {"profile": "deepseek-v2-lite-tp2"}
    assert single["depends_on"] is None  # scheduled: not held by the block
    for step in (pair, single):
        jsonschema.validate(step["plugins"][0][DEFAULT_PLUGIN], PLUGIN_CONFIGURATION)


def test_a_set_with_nothing_to_run_still_shows_every_profile(valid_pipeline):
    closed = {"cause": GATES_CLOSED, "remedy": OPEN_GATES}
    pipeline = set_pipeline(
        [decided(TINY, EXPLAIN, "closed", **closed), decided(LITE, EXPLAIN, "closed too", **closed)]
    )
    valid_pipeline(pipeline)
    ((info,),) = [group["steps"] for group in pipeline["steps"]]
    assert info["env"]["AFD_E2E_ANNOTATION"].splitlines()[2:] == [
        f"- **tiny-gpu-1a1f**: {GATES_CLOSED}: closed",
        f"- **deepseek-v2-lite-2a2f**: {GATES_CLOSED}: closed too",
        "",
        f"Where gates are closed: {OPEN_GATES}.",  # once for the set
    ]


def test_a_profile_in_a_set_and_given_alone_is_refused():
    with pytest.raises(UsageError, match="profile tiny-gpu-1a1f is given twice"):
        build_pipeline([decided(TINY, RUN)], GpuStepSettings(), [("afd-plugin-gpu", [decided(TINY, RUN)])])


@pytest.mark.parametrize("name", ["tiny-gpu-1a1f", "ci/profiles/my set.yaml", "--x--", "ünï/cödé", "$(x)", "a" * 80])
def test_the_plugin_spells_profiles_as_the_generator_does(name):
    script = f'. "{REPO}/plugin/lib.sh"; profile_slug "$1"'
    assert subprocess.run(["bash", "-c", script, "_", name], capture_output=True, text=True).stdout == step_slug(name)


@pytest.fixture
def generate(pipeline_cli, agents_api, valid_pipeline):
    def run(variables, agents, *args):
        agents_api.serve(AGENTS_LIST, agents)
        code, out, err = pipeline_cli({**BUILD, **variables}, "--profile-set", "afd-plugin-gpu", *args)
        assert code == 0, err
        pipeline = yaml.safe_load(out)
        valid_pipeline(pipeline)
        return pipeline

    return run


def test_cli_a_nightly_set_runs_one_step_per_pool_with_the_devices_left_to_the_agents(generate):
    pool_2 = agent("gpu2-a", "queue=gpu-2", "gpus=2")
    variables = {"BUILDKITE_SOURCE": "schedule", **GATES, "AFD_E2E_DEVICES": "0,1"}
    (group,) = generate(variables, [pool_2])["steps"]
    info, gpu = group["steps"]
    assert (
        f"**deepseek-v2-lite-2a2f**: {NO_AGENT}: no connected agent has gpus=4, queue=gpu-4"
        in info["env"]["AFD_E2E_ANNOTATION"]
    )
    assert gpu["agents"] == {"gpus": "2", "queue": "gpu-2"}
    assert gpu["env"] == GATES  # AFD_E2E_DEVICES: each pool's agents know their own GPUs


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--profile-set", "nope"], "error: unknown profile set 'nope'"),
        (["--profile", "tiny-gpu-1a1f"], "error: profile tiny-gpu-1a1f is given twice"),
    ],
)
def test_cli_bad_sets_are_one_line_errors(pipeline_cli, args, message):
    code, out, err = pipeline_cli({**BUILD, **GATES}, "--profile-set", "afd-plugin-gpu", *args)
    assert (code, out) == (2, "")
    assert f"afd-e2e pipeline: {message}" in err
    assert len(err.strip().splitlines()) == 1


def test_cli_without_any_profile_is_an_error(pipeline_cli):
    code, _, err = pipeline_cli(BUILD)
    assert code == 2
    assert "error: no profile given (fix: pass --profile NAME or --profile-set NAME)" in err


def test_block_then_each_pool_runs_its_chosen_cases(generate, tmp_path):
    """The generated set, run by a fake agent through the plugin's real hooks: the choice reaches each profile."""
    pools = [agent("gpu2", "queue=gpu-2", "gpus=2"), agent("gpu4", "queue=gpu-4", "gpus=4")]
    (group,) = generate({"BUILDKITE_SOURCE": "ui", **GATES}, pools, "--allowed-teams", "gpu")["steps"]
    block, lite, tiny = group["steps"]
    assert lite["depends_on"] == tiny["depends_on"] == [block["key"]]

    runner = FakeAgent(tmp_path / "gpu2")
    runner.unblock(block, ["tiny-gpu-1a1f/afd-1a1f", "tiny-gpu-1a1f/native-dp1", "deepseek-v2-lite-2a2f/afd-2a2f"])
    assert runner.run_plugin(tiny, REPO) == {"environment": 0, "pre-command": 0, "command": 0, "pre-exit": 0}
    # The gpu-2 pool holds several profiles of the set, so each runs into its own folder.
    run = "afd-e2e run --profile tiny-gpu-1a1f --out afd-e2e-out/tiny-gpu-1a1f --case afd-1a1f --case native-dp1"
    assert run in runner.calls()


def test_in_a_set_the_devices_are_the_agents_not_judged_or_forwarded():
    env = BuildEnv.from_environ({"BUILDKITE_SOURCE": "schedule", **QWEN_OPT_IN, "AFD_E2E_DEVICES": "0,1"})
    qwen = load_profile("qwen3.5-122b-a10b")

    def found(_wanted):
        return AgentAvailability(FOUND, "1 agent")

    with pytest.raises(UsageError, match="lists 2 devices"):
        decide(env, qwen, found)
    decision = decide(env, qwen, found, devices_on_agent=True)
    assert decision.action == RUN
    assert "AFD_E2E_DEVICES" not in decision.gate_env
