"""A multi-agent case's steps: the leader step the generator emits and the follower steps a leader uploads.

Both validate against Buildkite's schema and the plugin's own; the leader holds one group per agent pool set, the
followers carry their rendezvous in env and read it back; a follower pool with no agent is explained, not run.
"""

from __future__ import annotations

import dataclasses
import re

import jsonschema
import pytest
import yaml
from bk_support import QWEN_OPT_IN, RECORD_CALL, REPO

from afd_e2e.buildkite.env import BuildEnv
from afd_e2e.errors import UsageError
from afd_e2e.pipeline.agents import FOUND, NONE, UNKNOWN, AgentAvailability
from afd_e2e.pipeline.decide import EXPLAIN, RUN, Decision, ProfileDecision, decide
from afd_e2e.pipeline.followers import (
    PLUGIN_ENV,
    FollowerRendezvous,
    LeaderJob,
    follower_pipeline,
    leader_concurrency_group,
    pool_set,
)
from afd_e2e.pipeline.generate import GpuStepSettings, build_pipeline
from afd_e2e.pipeline.steps import render, step_timeout_minutes
from afd_e2e.pipeline.upload import upload_pipeline
from afd_e2e.plan.build import build_plan
from afd_e2e.profile import load_profile

PLUGIN_CONFIGURATION = yaml.safe_load((REPO / "plugin.yml").read_text(encoding="utf-8"))["configuration"]
PLUGIN = "acme/afd-e2e#v9.9.9"
GATES = {"AFD_E2E_BACKEND": "gpu", "AFD_E2E_LARGE_MODEL": "1", "AFD_GPU_E2E_MODEL": "/m", "AFD_E2E_DEVICES": "0,1"}
LEADER = LeaderJob("build-1", "0190aa11-2b3c-7d4e-8f90-a1b2c3d4e5f6", PLUGIN, "qwen3.5-122b-a10b-two-agents")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture(scope="module")
def qwen():
    return load_profile("qwen3.5-122b-a10b-two-agents")


@pytest.fixture(scope="module")
def tiny():
    return load_profile("tiny-cpu-two-agents")


def leader_step(profile, reference, settings=None):
    decision = Decision(RUN, "scheduled build", ("scheduled",), gate_env=GATES)
    pipeline = yaml.safe_load(
        render(build_pipeline([ProfileDecision(reference, profile, decision)], settings or GpuStepSettings(PLUGIN)))
    )
    (group,) = pipeline["steps"]
    (step,) = group["steps"]
    return pipeline, step


def uploaded(profile, case_id, leader=LEADER, environ=GATES):
    (case,) = build_plan(profile, model_path="/m", case_ids=[case_id]).cases
    return yaml.safe_load(render(follower_pipeline(profile, case, leader, environ)))


def test_a_profile_with_placed_cases_yields_one_leader_step_holding_its_pool_set(valid_pipeline, qwen):
    pipeline, step = leader_step(qwen, "qwen3.5-122b-a10b-two-agents")
    valid_pipeline(pipeline)
    jsonschema.validate(step["plugins"][0][PLUGIN], PLUGIN_CONFIGURATION)
    assert step["label"] == "afd-e2e qwen3.5-122b-a10b-two-agents (leader)"
    assert step["agents"] == {"queue": "large-model", "gpus": "8"}
    assert step["concurrency"] == 1
    assert step["concurrency_group"] == "afd-e2e/gpus=8,queue=large-model + gpus=8,queue=large-model-ffn"
    assert "concurrency_method" not in step  # ordered, Buildkite's default: leaders wait in line
    assert step["env"] == GATES | {PLUGIN_ENV: PLUGIN}


def test_the_leader_step_budgets_each_placed_case_its_rendezvous(qwen):
    placed = [case for case in qwen.cases if case.multi_agent]
    assert placed
    without = step_timeout_minutes([qwen])
    budgets = qwen.budgets.replaced(rendezvous_s=qwen.budgets.rendezvous_s + 600)
    longer = step_timeout_minutes([dataclasses.replace(qwen, budgets=budgets)])
    assert longer - without == pytest.approx(len(placed) * 600 * 1.15 / 60, abs=1)


def test_a_profile_without_placement_keeps_its_pools_group_and_no_plugin_env(qwen):
    single = load_profile("qwen3.5-122b-a10b")
    _, step = leader_step(single, "qwen3.5-122b-a10b")
    assert step["concurrency_group"] == "afd-e2e/gpus=8,queue=large-model" == leader_concurrency_group([single])
    assert PLUGIN_ENV not in step["env"] and step["label"] == "afd-e2e qwen3.5-122b-a10b"


def test_a_mirrored_placement_shares_the_leaders_group(tiny):
    """Leader on A with its server on B, and leader on B with its server on A: one group, so one at a time."""
    (case,) = tiny.cases
    server = case.placement["server"]
    mirrored_case = dataclasses.replace(case, placement={"server": dataclasses.replace(server, agents=tiny.agent_tags)})
    mirror = dataclasses.replace(tiny, agent_tags=server.agents, cases=(mirrored_case,))
    assert pool_set([tiny]) == pool_set([mirror]) == ("queue=afd-e2e-cpu", "queue=afd-e2e-cpu-follower")
    assert leader_concurrency_group([tiny]) == leader_concurrency_group([mirror])


def test_the_follower_upload_of_a_native_server(valid_pipeline, tiny):
    leader = LeaderJob("build-1", "job-leader", PLUGIN, "tiny-cpu-two-agents")
    environ = {"AFD_E2E_BACKEND": "cpu", "AFD_E2E_TINY_MODEL": "/models/tiny", "HOME": "/root"}
    pipeline = uploaded(tiny, "cpu-tp1-remote", leader, environ)
    valid_pipeline(pipeline)
    (step,) = pipeline["steps"]
    jsonschema.validate(step["plugins"][0][PLUGIN], PLUGIN_CONFIGURATION)
    assert step["plugins"] == [{PLUGIN: {"profile": "tiny-cpu-two-agents", "follow": "cpu-tp1-remote/server"}}]
    assert step["agents"] == {"queue": "afd-e2e-cpu-follower"}
    assert re.fullmatch(r"afd-e2e-follow-[0-9a-f]{12}-cpu-tp1-remote-server", step["key"]), step["key"]
    assert step["depends_on"] is None  # runs at once, held by no block of the build
    assert step["env"] == {
        "AFD_E2E_BACKEND": "cpu",
        "AFD_E2E_TINY_MODEL": "/models/tiny",
        "AFD_E2E_LEADER_BUILD": "build-1",
        "AFD_E2E_LEADER_JOB": "job-leader",
        "AFD_E2E_CASE": "cpu-tp1-remote",
        "AFD_E2E_PROCESS": "server",
        "AFD_E2E_ROLE": "native",
        "AFD_E2E_RENDEZVOUS_S": "120",
        "AFD_E2E_META_DATA_PREFIX": "afd-e2e/job-leader/",
    }
    assert (step["concurrency"], step["concurrency_group"], step["concurrency_method"]) == (
        1,
        "afd-e2e/tiny-cpu-two-agents/followers",
        "eager",
    )
    assert "retry" not in step  # a lost follower fails its leader's case; a retry would find nothing to join
    assert step["timeout_in_minutes"] >= (120 + 300 + 60 + 300) / 60


def test_followers_read_their_rendezvous_back(tiny):
    (step,) = uploaded(tiny, "cpu-tp1-remote")["steps"]
    rendezvous = FollowerRendezvous.from_env(step["env"])
    assert rendezvous == FollowerRendezvous("build-1", LEADER.job_id, "cpu-tp1-remote", "server", "native", 120.0)
    assert rendezvous.follow == step["plugins"][0][PLUGIN]["follow"]
    assert rendezvous.meta_data_prefix == step["env"]["AFD_E2E_META_DATA_PREFIX"]


def test_afd_ffn_on_a_follower_and_attention_over_two_agents(valid_pipeline, qwen):
    (ffn,) = uploaded(qwen, "afd-8a8f")["steps"]
    assert ffn["agents"] == {"queue": "large-model-ffn", "gpus": "8"}
    assert ffn["env"]["AFD_E2E_ROLE"] == "ffn" and ffn["plugins"][0][PLUGIN]["follow"] == "afd-8a8f/ffn"
    pipeline = uploaded(qwen, "afd-16a8f")
    valid_pipeline(pipeline)
    assert [s["plugins"][0][PLUGIN]["follow"] for s in pipeline["steps"]] == [
        "afd-16a8f/attention",
        "afd-16a8f/attention-node1",
    ]
    assert {s["agents"]["queue"] for s in pipeline["steps"]} == {"large-model"}
    # The profile's largest case needs two followers at once: the group lets exactly that many run.
    assert {s["concurrency"] for s in pipeline["steps"]} == {2} and ffn["concurrency"] == 2


def test_the_devices_gate_is_the_follower_agents_own(qwen):
    (ffn,) = uploaded(qwen, "afd-8a8f")["steps"]
    assert "AFD_E2E_DEVICES" not in ffn["env"]
    assert {k: ffn["env"][k] for k in ("AFD_E2E_BACKEND", "AFD_E2E_LARGE_MODEL", "AFD_GPU_E2E_MODEL")} == {
        k: GATES[k] for k in ("AFD_E2E_BACKEND", "AFD_E2E_LARGE_MODEL", "AFD_GPU_E2E_MODEL")
    }


def test_a_retried_leader_uploads_followers_with_other_keys_none_like_a_uuid(qwen):
    retried = LeaderJob("build-1", "0190aa11-2b3c-7d4e-8f90-a1b2c3d4e5f7", PLUGIN, LEADER.profile)
    first, second = uploaded(qwen, "afd-16a8f"), uploaded(qwen, "afd-16a8f", retried)
    keys = [step["key"] for step in (*first["steps"], *second["steps"])]
    assert len(set(keys)) == 4
    assert not [key for key in keys if UUID.search(key)]  # Buildkite refuses a key that resembles a UUID


def test_a_case_on_one_agent_uploads_nothing(qwen):
    assert uploaded(qwen, "native-dp8") == {"steps": []}


def test_the_leader_job_comes_from_buildkites_variables_and_its_generated_step():
    environ = {"BUILDKITE_BUILD_ID": "b", "BUILDKITE_JOB_ID": "j", PLUGIN_ENV: PLUGIN}
    assert LeaderJob.from_env(environ, "p") == LeaderJob("b", "j", PLUGIN, "p")
    with pytest.raises(UsageError, match=r"leader needs AFD_E2E_PLUGIN .*afd-e2e pipeline generates"):
        LeaderJob.from_env({"BUILDKITE_BUILD_ID": "b", "BUILDKITE_JOB_ID": "j"}, "p")


@pytest.mark.parametrize(
    ("drop", "change", "message"),
    [
        ("AFD_E2E_CASE", {}, "a follower job needs AFD_E2E_CASE"),
        (None, {"AFD_E2E_RENDEZVOUS_S": "soon"}, "AFD_E2E_RENDEZVOUS_S='soon' is not a number"),
    ],
)
def test_a_follower_without_its_rendezvous_is_one_line(tiny, drop, change, message):
    (step,) = uploaded(tiny, "cpu-tp1-remote")["steps"]
    environ = {k: v for k, v in step["env"].items() if k != drop} | change
    with pytest.raises(UsageError, match=message) as caught:
        FollowerRendezvous.from_env(environ)
    assert "\n" not in str(caught.value)


def lookup(missing: str = "", unknown: bool = False):
    def check(wanted):
        if unknown:
            return AgentAvailability(UNKNOWN, "could not check: HTTP 401")
        if wanted.get("queue") == missing:
            return AgentAvailability(NONE, f"no connected agent has queue={missing}")
        return AgentAvailability(FOUND, f"1 agent has queue={wanted.get('queue')}")

    return check


SCHEDULED = BuildEnv.from_environ({"BUILDKITE_SOURCE": "schedule", **QWEN_OPT_IN})


def test_a_follower_pool_without_agents_is_explained(qwen):
    decision = decide(SCHEDULED, qwen, lookup(missing="large-model-ffn"))
    assert decision.action == EXPLAIN
    assert decision.reasons == (
        "no connected agent has queue=large-model-ffn (the follower pool of case afd-8a8f: ffn)",
    )


def test_a_follower_pool_that_could_not_be_checked_is_one_warning(qwen):
    decision = decide(SCHEDULED, qwen, lookup(unknown=True))
    assert decision.warnings == ("could not check: HTTP 401",)


def test_the_leader_uploads_through_the_agent_without_interpolation(tmp_path, monkeypatch, tiny):
    """The upload edge, against the buildkite-agent stub's shared store: the steps arrive as rendered."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "buildkite-agent").symlink_to(RECORD_CALL)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv("STUB_CALLS", str(tmp_path / "calls.log"))
    monkeypatch.setenv("STUB_BUILDKITE_STORE", str(tmp_path / "store"))
    (case,) = build_plan(tiny, model_path="/m").cases
    pipeline = follower_pipeline(tiny, case, LEADER, GATES)
    upload_pipeline(pipeline)
    assert (tmp_path / "store" / "pipelines" / "000.yml").read_text(encoding="utf-8") == render(pipeline)
    assert (tmp_path / "calls.log").read_text(encoding="utf-8").splitlines() == [
        "buildkite-agent pipeline upload --no-interpolation"
    ]


def test_a_failed_upload_is_one_line(tmp_path, monkeypatch, tiny):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "buildkite-agent").symlink_to(RECORD_CALL)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv("STUB_CALLS", str(tmp_path / "calls.log"))
    monkeypatch.setenv("STUB_BUILDKITE_AGENT_PIPELINE_EXIT", "1")
    (case,) = build_plan(tiny, model_path="/m").cases
    with pytest.raises(UsageError, match="buildkite-agent pipeline upload exited 1"):
        upload_pipeline(follower_pipeline(tiny, case, LEADER, GATES))


def test_a_profile_sets_pool_with_a_multi_agent_profile_leads_over_its_pool_set(valid_pipeline, tiny):
    decision = Decision(RUN, "scheduled build", ("scheduled",), gate_env={"AFD_E2E_BACKEND": "cpu"})
    members = [ProfileDecision(name, load_profile(name), decision) for name in ("tiny-cpu", "tiny-cpu-two-agents")]
    pipeline = yaml.safe_load(render(build_pipeline([], GpuStepSettings(PLUGIN), [("cpu", members)])))
    valid_pipeline(pipeline)
    (group,) = pipeline["steps"]
    steps = {step["label"]: step for step in group["steps"]}
    assert steps["afd-e2e tiny-cpu"]["concurrency_group"] == "afd-e2e/queue=default"
    assert PLUGIN_ENV not in steps["afd-e2e tiny-cpu"]["env"]
    leader = steps["afd-e2e tiny-cpu-two-agents (leader)"]
    assert leader["concurrency_group"] == leader_concurrency_group([tiny])
    assert leader["env"][PLUGIN_ENV] == PLUGIN
