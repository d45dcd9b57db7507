"""Two builds of multi-agent cases on a finite pool of two agents (tests/agent_pool.py): with one concurrency group
per agent pool set on the leaders they finish; without it (no group, or each leader's own pool's group, as single-agent
steps have) each build holds one agent and waits for the other's, and nothing moves. A follower that starts after its
leader gave up finds nothing to join and gives its agent back at once.

The generated leader steps and the follower steps their leaders upload run as separate processes under the plugin's
real hooks; ``afd-e2e`` is tests/pool_afd_e2e.py (the real join and gates, a stand-in for the run-time rendezvous).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from afd_e2e.multi_agent.lifecycle import leader_state_key
from afd_e2e.pipeline.decide import RUN, Decision, ProfileDecision
from afd_e2e.pipeline.followers import leader_concurrency_group, tags_text
from afd_e2e.pipeline.generate import GpuStepSettings, build_pipeline
from afd_e2e.pipeline.steps import render
from afd_e2e.profile import load_profile
from agent_pool import FINISHED, POLL_S, WAITING, AgentPool, PoolAgent, PoolJob
from repo_paths import REPO
from unit.timing import FakeClock

PROFILE = "tiny-cpu-two-agents"
LEADER_POOL, FOLLOWER_POOL = {"queue": "afd-e2e-cpu"}, {"queue": "afd-e2e-cpu-follower"}
AGENTS = (PoolAgent("agent-a", LEADER_POOL), PoolAgent("agent-b", FOLLOWER_POOL))
# Longer than any quiet moment of a build that moves: about 1 s, a job's hook starting Python on a busy 2-core machine.
# A deadlock is found at once (every running leader waits for followers that cannot start), not after this: on the
# real clock it is only a guard against a hang. The no-progress finder itself is tested on a FakeClock (below).
NO_PROGRESS_S = 60.0


def waits_for_its_followers(job: PoolJob) -> bool:
    """A leader whose last word is that it uploaded its followers and waits for them (tests/pool_afd_e2e.py): it
    moves again only once a follower runs."""
    said = [line for line in job.log().splitlines() if line.startswith("afd-e2e run: ")]
    return bool(said) and said[-1].endswith("follower(s), waiting")


def variant(
    tmp_path: Path, name: str, *, mirrored: bool = False, one_pool: bool = False, rendezvous_s: float | None = None
) -> str:
    """The shipped profile as a file in the checkout under another name: its pools swapped (the leader on the
    follower pool, the server placed on the leader pool), the server on another agent of the leader's own pool (as
    a role spanning agents of one pool), or a shorter rendezvous budget."""
    data = yaml.safe_load((REPO / "python" / "afd_e2e" / "profiles" / f"{PROFILE}.yaml").read_text(encoding="utf-8"))
    data["name"] = name
    placed = data["cases"]["cpu-tp1-remote"]["placement"]["server"]
    if mirrored:
        data["agent_tags"], placed["agents"] = placed["agents"], data["agent_tags"]
    if one_pool:
        placed["agents"] = data["agent_tags"]
    if rendezvous_s is not None:
        data["budgets"]["rendezvous_s"] = rendezvous_s
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(path)


def leader_steps(valid_pipeline, reference: str, gate_env: dict[str, str]) -> list[dict]:
    """What the generator emits for the profile in a scheduled build: its leader step (validated)."""
    decision = Decision(RUN, "scheduled build", ("scheduled builds run unattended",), gate_env=gate_env)
    pipeline = yaml.safe_load(
        render(build_pipeline([ProfileDecision(reference, load_profile(reference), decision)], GpuStepSettings()))
    )
    valid_pipeline(pipeline)
    (group,) = pipeline["steps"]
    return group["steps"]


def without_the_design(steps: list[dict], reference: str, design: str) -> list[dict]:
    """``none``: leaders in no group; ``leader pool``: each in its own pool's group, as a single-agent step."""
    changed = []
    for step in steps:
        step = dict(step)
        if design == "none":
            del step["concurrency"], step["concurrency_group"]
        elif design == "leader pool":
            step["concurrency_group"] = f"afd-e2e/{tags_text(load_profile(reference).agent_tags)}"
        changed.append(step)
    return changed


@pytest.fixture
def pool(tmp_path):
    model = tmp_path / "tiny-model"
    model.mkdir()
    agents = AgentPool(
        tmp_path / "pool", AGENTS, commands={"afd-e2e": [sys.executable, str(REPO / "tests" / "pool_afd_e2e.py")]}
    )
    return agents, {"AFD_E2E_BACKEND": "cpu", "AFD_E2E_TINY_MODEL": str(model)}


def two_builds(tmp_path, valid_pipeline, pool, design: str):
    agents, gates = pool
    mirrored = variant(tmp_path, "tiny-cpu-two-agents-mirrored", mirrored=True)
    for build, reference in (("build-1", PROFILE), ("build-2", mirrored)):
        steps = leader_steps(valid_pipeline, reference, gates)
        if design != "pool set":
            steps = without_the_design(steps, reference, design)
        agents.start_build(build, steps)
    return agents.run(no_progress_s=NO_PROGRESS_S, stuck=waits_for_its_followers)


def test_two_builds_needing_both_pools_finish_with_one_group_per_pool_set(tmp_path, valid_pipeline, pool):
    assert leader_concurrency_group([load_profile(PROFILE)]) == (
        "afd-e2e/queue=afd-e2e-cpu + queue=afd-e2e-cpu-follower"
    )
    outcome = two_builds(tmp_path, valid_pipeline, pool, "pool set")
    assert outcome.deadlock is None, outcome.deadlock.describe()
    for build in ("build-1", "build-2"):
        leader, follower = outcome.of_build(build)
        assert (leader.exit_status, follower.exit_status) == (0, 0), leader.log() + follower.log()
        assert "every follower is ready, running the workloads" in leader.log()
        assert f"leader job {leader.id} is waiting: joining its rendezvous" in follower.log()
        assert "afd-e2e run: cpu-tp1-remote/server ready on" in follower.log()
        (upload,) = (pool[0].builds[build].store / "pipelines").iterdir()  # the leader's, with its follower
        valid_pipeline(yaml.safe_load(upload.read_text(encoding="utf-8")))
    (first, first_follower), (second, _) = outcome.of_build("build-1"), outcome.of_build("build-2")
    # One leader at a time holds the pool set; the other waited in its group, holding no agent.
    assert second.started >= first.finished
    assert {first.agent, first_follower.agent} == {"agent-a", "agent-b"} and second.agent == "agent-b"


@pytest.mark.parametrize("design", ["none", "leader pool"])
def test_without_it_two_builds_each_hold_half_and_wait_for_the_other(tmp_path, valid_pipeline, pool, design):
    outcome = two_builds(tmp_path, valid_pipeline, pool, design)
    assert outcome.deadlock is not None, "the two builds finished: the pool did not deadlock"
    report = outcome.deadlock.describe()
    assert outcome.deadlock.holding == (
        ("build-1: afd-e2e tiny-cpu-two-agents (leader)", "agent-a"),
        ("build-2: afd-e2e tiny-cpu-two-agents-mirrored (leader)", "agent-b"),
    ), report
    waiting = dict(outcome.deadlock.waiting)
    assert waiting == {
        "build-1: afd-e2e tiny-cpu-two-agents cpu-tp1-remote/server (follower on queue=afd-e2e-cpu-follower)": (
            "an agent with queue=afd-e2e-cpu-follower: agent-b runs build-2: afd-e2e tiny-cpu-two-agents-mirrored "
            "(leader)"
        ),
        "build-2: afd-e2e tiny-cpu-two-agents-mirrored cpu-tp1-remote/server (follower on queue=afd-e2e-cpu)": (
            "an agent with queue=afd-e2e-cpu: agent-a runs build-1: afd-e2e tiny-cpu-two-agents (leader)"
        ),
    }, report
    leaders = [job for job in outcome.jobs if job.state == FINISHED]
    assert [job.exit_status for job in leaders] == [-9, -9]  # the pool killed what it held; the followers never ran
    assert [job.state for job in outcome.jobs if job not in leaders] == [WAITING, WAITING]


def test_a_follower_whose_leader_gave_up_finds_nothing_to_join(tmp_path, valid_pipeline, pool):
    """The follower pool is busy until the leader's rendezvous budget has run out: the leader ends, and its
    follower, picked up later (an uploaded step cannot be withdrawn), passes at once through the real hooks and
    afd-e2e join."""
    agents, gates = pool
    reference = variant(tmp_path, "tiny-cpu-two-agents-impatient", rendezvous_s=1)
    # Another job holds the follower pool's one agent until the leader has ended (the pool names jobs in order).
    state = leader_state_key("build-1-job-02")
    until_ended = f'until [[ "$(buildkite-agent meta-data get {state} --default "")" == ended:* ]]; do sleep 0.2; done'
    busy = {"label": "busy", "key": "busy", "command": until_ended, "agents": FOLLOWER_POOL}
    agents.start_build("build-1", [busy, *leader_steps(valid_pipeline, reference, gates)])
    outcome = agents.run(no_progress_s=NO_PROGRESS_S, stuck=waits_for_its_followers)
    assert outcome.deadlock is None, outcome.deadlock.describe()
    busy_job, leader, follower = outcome.jobs
    assert leader.id == "build-1-job-02"
    assert leader.exit_status == 1
    assert "follower server on queue=afd-e2e-cpu-follower was not ready within the rendezvous budget (1 s)" in (
        leader.log()
    )
    assert follower.started >= busy_job.finished
    assert follower.exit_status == 0
    assert f"leader job {leader.id} has already ended (failed): nothing to join" in follower.log()
    assert "ready on" not in follower.log()  # it never ran a role for a leader that is gone


@pytest.mark.parametrize("design", ["pool set", "none"])
def test_two_builds_on_one_pool_of_two_agents(tmp_path, valid_pipeline, design):
    """Each build's leader and follower on the same pool of two agents (as Attention over two agents of the
    leader's pool): with the group one build at a time holds both; without it each leader holds one agent."""
    model = tmp_path / "tiny-model"
    model.mkdir()
    agents = AgentPool(
        tmp_path / "pool",
        (PoolAgent("agent-a", LEADER_POOL), PoolAgent("agent-c", LEADER_POOL)),
        commands={"afd-e2e": [sys.executable, str(REPO / "tests" / "pool_afd_e2e.py")]},
    )
    reference = variant(tmp_path, "tiny-cpu-one-pool", one_pool=True)
    for build in ("build-1", "build-2"):
        steps = leader_steps(valid_pipeline, reference, {"AFD_E2E_BACKEND": "cpu", "AFD_E2E_TINY_MODEL": str(model)})
        agents.start_build(build, steps if design == "pool set" else without_the_design(steps, reference, design))
    outcome = agents.run(no_progress_s=NO_PROGRESS_S, stuck=waits_for_its_followers)
    if design == "pool set":
        assert outcome.deadlock is None, outcome.deadlock.describe()
        assert [job.exit_status for job in outcome.jobs] == [0, 0, 0, 0]
        (first, _), (second, _) = outcome.of_build("build-1"), outcome.of_build("build-2")
        assert second.started >= first.finished
    else:
        assert outcome.deadlock is not None, "the two builds finished: the pool did not deadlock"
        assert [agent for _, agent in outcome.deadlock.holding] == ["agent-a", "agent-c"]
        assert [why for _, why in outcome.deadlock.waiting] == [
            "an agent with queue=afd-e2e-cpu: agent-a runs build-1: afd-e2e tiny-cpu-one-pool (leader); "
            "agent-c runs build-2: afd-e2e tiny-cpu-one-pool (leader)"
        ] * 2


def test_jobs_waiting_while_nothing_moves_are_a_deadlock_once_no_progress_s_passed_on_the_pools_clock(tmp_path):
    """The deadlock finder without ``stuck``: no job started, ended, wrote or printed anything for ``no_progress_s``
    on the clock the pool was given (a FakeClock the pool's own polls move), however long that took in real time."""
    clock = FakeClock()
    agents = AgentPool(tmp_path / "pool", (PoolAgent("agent-a", {}),), clock=clock, sleep=clock.sleep)
    agents.start_build(
        "build-1", [{"label": "holds", "command": "exec sleep 600"}, {"label": "waits", "command": "true"}]
    )

    outcome = agents.run(no_progress_s=5.0)

    assert outcome.deadlock is not None, "the jobs finished: the first one should hold its agent"
    assert outcome.deadlock.no_progress_s == 5.0 and outcome.elapsed_s == pytest.approx(5.0, abs=POLL_S)
    assert "nothing has moved for 5 s" in outcome.deadlock.describe()
    assert outcome.deadlock.holding == (("build-1: holds", "agent-a"),)
    assert outcome.deadlock.waiting == (("build-1: waits", "an agent with queue=default: agent-a runs build-1: holds"),)
    held, waited = outcome.jobs
    assert (held.state, held.exit_status, waited.state) == (FINISHED, -9, WAITING)  # the pool killed what it held
