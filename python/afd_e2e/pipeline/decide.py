"""The one selection function: from the build, a profile and the agents, decide run / block-then-run / explain.

Rules, in order (each outcome names its reasons, so nothing is dropped silently):
1. gates malformed: an error (UsageError), the build's configuration must be fixed;
   gates closed: **explain** (no GPU step), listing each closed gate. The model gate is only checked to be set here,
   since the checkpoint lives on the GPU agent; its environment hook checks the directory.
2. a pull request from a fork with no ``allowed_teams`` configured: **explain**; untrusted code reaches a GPU agent
   only through a block that only trusted teams may unblock.
3. no connected agent has the profile's tags, or the tags of a pool a case places a process on (its followers'):
   **explain** (a job for a missing agent would wait in the queue, a leader for a missing follower until its
   rendezvous budget runs out).
   The check failed (no token, API down, 401): the run is still offered, but behind a block, with a warning: a
   person confirms instead of a job waiting for an agent that may not exist, and a broken token is not hidden by
   silently dropping every run.
4. a pull request under a GPU cap (``pr_max_gpus``, the generator's ``--pr-max-gpus``): cases needing more GPUs
   are left out of its block, each named with its GPU count; a profile whose every case is over the cap: **explain**.
   Scheduled and manual builds are not capped: the cap keeps a PR's wait for agents short, the nightly covers the rest.
5. a scheduled build with the agents confirmed: **run** unattended. Anything else (manual, API, webhook, pull
   request, trigger): **block**, then run; fork pull requests' blocks are restricted to ``allowed_teams``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from afd_e2e.buildkite.env import BuildEnv
from afd_e2e.pipeline.agents import NONE, UNKNOWN, AgentsLookup
from afd_e2e.plan.gates import BACKEND_ENV, CLOSED, INVALID, LARGE_MODEL_ENV, evaluate_gates
from afd_e2e.profile import CaseSpec, Profile

RUN, BLOCK, EXPLAIN = "run", "block", "explain"
EMITTED = {RUN: "GPU step runs unattended", BLOCK: "GPU step behind a block step", EXPLAIN: "no GPU step"}
GATES_CLOSED = "its opt-in gates are closed"
OPEN_GATES = (
    "to open them, set the variables named here in the environment of `afd-e2e pipeline` "
    "(in Buildkite, the bootstrap step's env)"
)
FORK_WITHOUT_TEAMS = "no team may unblock a fork's run"
NO_AGENT = "a GPU job would wait in the queue for an agent that is not there"
OVER_PR_CAP = "every case needs more GPUs than a pull request may use"
RAISE_PR_CAP = "run it from a manual build, or raise --pr-max-gpus in the bootstrap step"


@dataclass(frozen=True)
class Decision:
    """What to emit for one profile, and why (the reasons are shown in the annotation or the block prompt)."""

    action: str
    build: str  # e.g. "pull request #12 of branch x", for headlines
    reasons: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    allowed_teams: tuple[str, ...] = ()
    gate_env: Mapping[str, str] = field(default_factory=dict)  # the opt-in the GPU step runs under
    cause: str = ""  # why no GPU step (explain only), in words: the reasons are its details
    remedy: str = ""  # what opens the way, where the reasons alone do not say where to act
    left_out: Mapping[str, str] = field(default_factory=dict)  # case id -> why this build does not offer it

    @property
    def why(self) -> str:
        """The cause and its remedy: ``its opt-in gates are closed; to open them, set in ...``."""
        return "; ".join(part for part in (self.cause, self.remedy) if part)

    def headline(self) -> str:
        """What is emitted and why, e.g. ``no GPU step (build outside Buildkite): its opt-in gates are closed; ...``:
        "explain" alone left the reader to guess whether the build's origin or the gates kept the run out."""
        emitted = f"{EMITTED[self.action]} ({self.build})"
        return f"{emitted}: {self.why}" if self.why else emitted


@dataclass(frozen=True)
class ProfileDecision:
    """A profile as the plugin should load it (name or path), the loaded profile, and what was decided for it."""

    reference: str
    profile: Profile
    decision: Decision

    @property
    def offered(self) -> tuple[CaseSpec, ...]:
        """The cases this build may run: the profile's, less those the decision left out."""
        return tuple(case for case in self.profile.cases if case.id not in self.decision.left_out)


def decide(
    env: BuildEnv,
    profile: Profile,
    agents: AgentsLookup,
    *,
    allowed_teams: tuple[str, ...] = (),
    devices_on_agent: bool = False,
    pr_max_gpus: int | None = None,
) -> Decision:
    """``devices_on_agent`` (a profile set, whose profiles differ in size): the devices gate is left to the GPU
    agent's own environment, since one bootstrap value cannot fit every profile; it is neither judged nor forwarded.
    ``pr_max_gpus``: the most GPUs a pull request's case may use (None: no cap)."""
    devices = ",".join(map(str, profile.default_devices)) if devices_on_agent and profile.device_count else None
    gates = evaluate_gates(profile, env.variables, devices=devices, require_model_dir=False)
    if gates.status == INVALID:
        raise gates.usage_error(f"profile {profile.name}")
    build = env.describe()
    if gates.status == CLOSED:
        return Decision(EXPLAIN, build, gates.reasons, cause=GATES_CLOSED, remedy=OPEN_GATES)

    if env.is_fork and not allowed_teams:
        return Decision(
            EXPLAIN,
            build,
            (
                "a fork's code reaches a GPU agent only after a trusted team unblocks it, and no team is configured; "
                "fix: pass --allowed-teams to afd-e2e pipeline",
            ),
            cause=FORK_WITHOUT_TEAMS,
        )

    left_out = over_pr_cap(profile, pr_max_gpus) if env.pull_request is not None else {}
    if len(left_out) == len(profile.cases):
        return Decision(
            EXPLAIN, build, tuple(left_out.values()), cause=OVER_PR_CAP, remedy=RAISE_PR_CAP, left_out=left_out
        )

    found = agents(profile.agent_tags)
    if found.status == NONE:
        return Decision(EXPLAIN, build, (found.detail,), cause=NO_AGENT)
    followers = [(where, agents(tags)) for where, tags in follower_pools(profile).items()]
    missing = [f"{check.detail} (the follower pool of {where})" for where, check in followers if check.status == NONE]
    if missing:
        return Decision(EXPLAIN, build, tuple(missing), cause=NO_AGENT)
    warnings = tuple(
        dict.fromkeys(check.detail for check in (found, *(c for _, c in followers)) if check.status == UNKNOWN)
    )
    forwarded = [
        name for name in gate_variables(profile) if not (devices_on_agent and name == profile.gates.devices_env)
    ]
    gate_env = {name: env.variables[name] for name in forwarded if name in env.variables}

    if env.is_scheduled and not warnings:
        return Decision(RUN, build, ("scheduled builds run unattended", found.detail), gate_env=gate_env)
    reasons = ["a person confirms the run and picks the cases"]
    if env.is_fork:
        reasons.append(f"the code comes from a fork: only {', '.join(allowed_teams)} may unblock it")
    reasons.append("unblock only if a matching agent is up: the agent check failed" if warnings else found.detail)
    reasons += left_out.values()
    return Decision(BLOCK, build, tuple(reasons), warnings, allowed_teams, gate_env, left_out=left_out)


def over_pr_cap(profile: Profile, pr_max_gpus: int | None) -> dict[str, str]:
    """The cases a pull request leaves out under its GPU cap, each with why (its GPU count against the cap)."""
    if pr_max_gpus is None:
        return {}
    return {
        case.id: f"case {case.id} is left out: it uses {gpus} GPUs and a pull request runs cases of at most "
        f"{pr_max_gpus} (--pr-max-gpus); scheduled and manual builds run it"
        for case in profile.cases
        if (gpus := profile.gpus(case)) > pr_max_gpus
    }


def follower_pools(profile: Profile) -> dict[str, Mapping[str, str]]:
    """Each agent pool a case places a process on, named by where it is used (``case cpu-tp1-remote: server``)."""
    pools: dict[str, Mapping[str, str]] = {}
    for case in profile.cases:
        for role, placement in case.placement.items():
            pools[f"case {case.id}: {role}"] = placement.agents
    return pools


def gate_variables(profile: Profile) -> list[str]:
    """The variables that open the profile's gates, as the GPU step carries them."""
    gates = profile.gates
    names = [BACKEND_ENV, gates.model_env]
    if gates.large_model:
        names.append(LARGE_MODEL_ENV)
    if gates.devices_env:
        names.append(gates.devices_env)
    return names
