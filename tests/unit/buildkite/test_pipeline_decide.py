"""decide(): the one selection function, table-tested over sources, gates, forks, teams and agent availability."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from bk_support import QWEN_OPT_IN as OPT_IN

from afd_e2e.buildkite.env import BuildEnv
from afd_e2e.errors import UsageError
from afd_e2e.pipeline.agents import FOUND, NONE, UNKNOWN, AgentAvailability
from afd_e2e.pipeline.decide import BLOCK, EXPLAIN, RUN, decide
from afd_e2e.profile import load_profile

REPO_URL = "git@github.com:vllm-project/vllm.git"
SCHEDULE = {"BUILDKITE_SOURCE": "schedule"}
UI = {"BUILDKITE_SOURCE": "ui"}
API = {"BUILDKITE_SOURCE": "api"}
PUSH = {"BUILDKITE_SOURCE": "webhook", "BUILDKITE_PULL_REQUEST": "false"}
TRIGGER = {"BUILDKITE_SOURCE": "trigger_job"}
PR = {"BUILDKITE_SOURCE": "webhook", "BUILDKITE_PULL_REQUEST": "12", "BUILDKITE_PULL_REQUEST_REPO": REPO_URL}
FORK = {
    "BUILDKITE_SOURCE": "webhook",
    "BUILDKITE_PULL_REQUEST": "13",
    "BUILDKITE_PULL_REQUEST_REPO": "https://github.com/someone/vllm.git",
}
AGENT_UP = AgentAvailability(FOUND, "1 connected agent(s) have gpus=8, queue=large-model: gpu-1")
NO_AGENT = AgentAvailability(NONE, "no connected agent has gpus=8, queue=large-model (3 connected agents checked)")
CHECK_FAILED = AgentAvailability(UNKNOWN, "could not check for a matching agent: the agents API answered HTTP 401")
TEAMS = ("gpu-maintainers",)


@dataclass
class FakeLookup:
    answer: AgentAvailability
    asked: list[dict[str, str]] = field(default_factory=list)

    def __call__(self, wanted):
        self.asked.append(dict(wanted))
        return self.answer


@dataclass(frozen=True)
class Row:
    build: dict[str, str]
    agents: AgentAvailability = AGENT_UP
    teams: tuple[str, ...] = ()
    opt_in: dict[str, str] = field(default_factory=lambda: dict(OPT_IN))
    # expected
    action: str = BLOCK
    says: str = ""  # a reason (or warning) containing this
    warned: bool = False
    allowed_teams: tuple[str, ...] = ()
    asks_agents: bool = True


TABLE = {
    "gates closed: nothing, and why": Row(
        SCHEDULE,
        opt_in={**OPT_IN, "AFD_E2E_LARGE_MODEL": ""},
        action=EXPLAIN,
        says="AFD_E2E_LARGE_MODEL is not set; set AFD_E2E_LARGE_MODEL=1",
        asks_agents=False,
    ),
    "large model opted out": Row(
        UI, opt_in={**OPT_IN, "AFD_E2E_LARGE_MODEL": "0"}, action=EXPLAIN, says="opts out", asks_agents=False
    ),
    "backend is cpu": Row(
        PR, opt_in={**OPT_IN, "AFD_E2E_BACKEND": "cpu"}, action=EXPLAIN, says="runs on gpu", asks_agents=False
    ),
    "nightly with an agent: run unattended": Row(SCHEDULE, action=RUN, says="scheduled builds run unattended"),
    "nightly without an agent: nothing, and why": Row(SCHEDULE, NO_AGENT, action=EXPLAIN, says="no connected agent"),
    "nightly, agent check failed: block with a warning": Row(SCHEDULE, CHECK_FAILED, says="HTTP 401", warned=True),
    "manual (ui): block then run": Row(UI, says="a person confirms the run and picks the cases"),
    "manual (api): block then run": Row(API, says="a person confirms the run"),
    "push: block then run": Row(PUSH, says="gpu-1"),
    "triggered: block then run": Row(TRIGGER),
    "manual without an agent: nothing, and why": Row(UI, NO_AGENT, action=EXPLAIN, says="no connected agent"),
    "pull request: block": Row(PR),
    "pull request with teams: block restricted": Row(PR, teams=TEAMS, allowed_teams=TEAMS),
    "fork without teams: nothing, and why": Row(
        FORK, teams=(), action=EXPLAIN, says="fix: pass --allowed-teams", asks_agents=False
    ),
    "fork with teams: block restricted": Row(
        FORK, teams=TEAMS, says="comes from a fork: only gpu-maintainers may unblock", allowed_teams=TEAMS
    ),
    "fork, agent check failed: block restricted, warned": Row(
        FORK, CHECK_FAILED, teams=TEAMS, warned=True, allowed_teams=TEAMS, says="HTTP 401"
    ),
}


@pytest.fixture(scope="module")
def qwen():
    return load_profile("qwen3.5-122b-a10b")


@pytest.mark.parametrize("row", TABLE.values(), ids=TABLE.keys())
def test_decision_table(qwen, row):
    env = BuildEnv.from_environ({"BUILDKITE_REPO": REPO_URL, "BUILDKITE_BRANCH": "main", **row.build, **row.opt_in})
    lookup = FakeLookup(row.agents)

    decision = decide(env, qwen, lookup, allowed_teams=row.teams)

    assert decision.action == row.action
    assert any(row.says in line for line in decision.reasons + decision.warnings), decision
    assert bool(decision.warnings) is row.warned
    assert decision.allowed_teams == row.allowed_teams
    assert lookup.asked == ([{"queue": "large-model", "gpus": "8"}] if row.asks_agents else [])
    assert decision.build == env.describe()
    if decision.action == EXPLAIN:
        assert decision.gate_env == {}


def test_the_gpu_step_runs_under_the_opt_in_the_generator_saw(qwen):
    env = BuildEnv.from_environ({**SCHEDULE, **OPT_IN, "UNRELATED": "x"})
    assert decide(env, qwen, FakeLookup(AGENT_UP)).gate_env == OPT_IN


def test_the_checkpoint_is_not_looked_for_on_the_generator_agent(qwen, tmp_path):
    missing = tmp_path / "not-here"
    env = BuildEnv.from_environ({**SCHEDULE, **OPT_IN, "AFD_GPU_E2E_MODEL": str(missing)})
    decision = decide(env, qwen, FakeLookup(AGENT_UP))
    assert decision.action == RUN
    assert decision.gate_env["AFD_GPU_E2E_MODEL"] == str(missing)


def test_malformed_gates_are_an_error_to_fix(qwen):
    env = BuildEnv.from_environ({**UI, **OPT_IN, "AFD_E2E_DEVICES": "0,0,1,2,3,4,5,6"})
    with pytest.raises(UsageError, match=r"profile qwen3.5-122b-a10b: AFD_E2E_DEVICES=.* repeats \[0\]"):
        decide(env, qwen, FakeLookup(AGENT_UP))


def test_a_profile_without_devices_forwards_only_its_gates():
    tiny = load_profile("tiny-cpu")
    env = BuildEnv.from_environ({**OPT_IN, **SCHEDULE, "AFD_E2E_BACKEND": "cpu", "AFD_E2E_TINY_MODEL": "/m"})
    lookup = FakeLookup(AGENT_UP)
    decision = decide(env, tiny, lookup)
    assert decision.action == RUN
    assert decision.gate_env == {"AFD_E2E_BACKEND": "cpu", "AFD_E2E_TINY_MODEL": "/m"}
    assert lookup.asked == [{}]
