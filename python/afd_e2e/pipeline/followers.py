"""A multi-agent case's steps: the leader's concurrency group, and the follower steps a leader uploads at run time.

The leader job runs the workloads and hosts its own roles; for each process placed on another agent pool it uploads
one follower step (``follower_pipeline``, rendered by ``steps.render`` for ``buildkite-agent pipeline upload
--no-interpolation``) while it waits at the rendezvous.

Two builds must never deadlock, each holding half the agents while waiting for the other half. So:
- every leader holds one concurrency group per **agent pool set** (its own pool and every pool its cases place a
  process on; ``leader_concurrency_group``), concurrency 1, ordered: of all the leaders that need the same pools,
  one at a time holds agents and waits for followers; the others wait, in order, holding nothing. A profile without
  placement keeps its pool's group (``afd-e2e/<tags>``), as before.
- followers exist only while their leader waits: the leader uploads them after it publishes ``waiting``; a follower
  that starts after its leader has ended finds nothing to join and exits at once (multi_agent/lifecycle.py, the
  plugin's ``follow`` option). Followers share one group per profile (``follower_concurrency_group``): at most one
  leader's worth of followers of the profile hold agents at once (stale ones, left by a leader that gave up, since an
  uploaded step cannot be withdrawn, exit at once), and ``eager``, so a live follower never waits in line behind a
  stale one that wants another pool.
- a leader waits at most ``budgets.rendezvous_s`` for its followers, so leaders whose pool sets only partly overlap
  (which no single group covers) wait on each other at most that long, then fail, naming the follower.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from afd_e2e.buildkite.env import BUILD_ID, JOB_ID, build_id, job_id
from afd_e2e.errors import UsageError
from afd_e2e.pipeline.decide import gate_variables
from afd_e2e.pipeline.steps import STEP_MARGIN, STEP_OVERHEAD_MINUTES, CommandStep, Pipeline, step_slug
from afd_e2e.plan.addresses import meta_data_key
from afd_e2e.plan.model import CasePlan, ProcessPlan
from afd_e2e.profile import Profile, catalogue

PLUGIN_ENV = "AFD_E2E_PLUGIN"  # on a leader step: the plugin reference its followers run (the generator sets it)
GROUP_PREFIX = "afd-e2e/"
DEFAULT_POOL = "queue=default"  # a step without agents tags runs on the default queue
# A follower step's env: FollowerRendezvous field -> variable.
RENDEZVOUS_ENV = {
    "leader_build": "AFD_E2E_LEADER_BUILD",
    "leader_job": "AFD_E2E_LEADER_JOB",  # also read by the plugin's check_leader
    "case": "AFD_E2E_CASE",
    "process": "AFD_E2E_PROCESS",
    "role": "AFD_E2E_ROLE",
    "rendezvous_s": "AFD_E2E_RENDEZVOUS_S",
}
PREFIX_ENV = "AFD_E2E_META_DATA_PREFIX"  # and the rendezvous' meta-data key prefix, for scripts and logs


def tags_text(tags: Mapping[str, str]) -> str:
    """An agent pool by its tags, sorted: ``gpus=8,queue=large-model``."""
    return ",".join(f"{k}={v}" for k, v in sorted(tags.items())) or DEFAULT_POOL


def pool_set(profiles: Iterable[Profile]) -> tuple[str, ...]:
    """Every agent pool the profiles' jobs hold: each leader's pool and each pool a case places a process on."""
    pools = set()
    for profile in profiles:
        pools.add(tags_text(profile.agent_tags))
        pools.update(tags_text(p.agents) for case in profile.cases for p in case.placement.values())
    return tuple(sorted(pools))


def leader_concurrency_group(profiles: Iterable[Profile]) -> str:
    """The one group of every job that holds agents of this pool set (``afd-e2e/a + b``), concurrency 1."""
    return GROUP_PREFIX + " + ".join(pool_set(profiles))


def follower_concurrency_group(profile: Profile) -> str:
    return f"{GROUP_PREFIX}{profile.name}/followers"


def followers_at_once(profile: Profile) -> int:
    """The most follower jobs one case of the profile needs at once (a role over N agents is N followers)."""
    return max((sum(p.nodes for p in case.placement.values()) for case in profile.cases), default=0)


@dataclass(frozen=True)
class LeaderJob:
    """The leader as its followers find it: its build and job, the plugin and the profile (as the plugin loaded it)."""

    build_id: str
    job_id: str
    plugin: str
    profile: str

    @classmethod
    def from_env(cls, environ: Mapping[str, str], profile: str) -> LeaderJob:
        """The running leader job (Buildkite's variables, and the plugin reference its generated step carries)."""
        build, job, plugin = build_id(environ), job_id(environ), environ.get(PLUGIN_ENV)
        missing = [name for name, value in ((BUILD_ID, build), (JOB_ID, job), (PLUGIN_ENV, plugin)) if not value]
        if not (build and job and plugin):
            raise UsageError(
                f"a multi-agent case's leader needs {', '.join(missing)}",
                "run it in the leader step afd-e2e pipeline generates (it sets AFD_E2E_PLUGIN)",
            )
        return cls(build, job, plugin, profile)


@dataclass(frozen=True)
class FollowerRendezvous:
    """What a follower job needs to find its leader, in its step's ``env`` (``to_env``; read back by ``from_env``)."""

    leader_build: str
    leader_job: str
    case: str
    process: str  # the ProcessPlan's name: "server", "ffn", "attention-node1"
    role: str  # "native", "ffn" or "attention"
    rendezvous_s: float

    @property
    def meta_data_prefix(self) -> str:
        """Every meta-data key of this rendezvous starts with it (plan/addresses.py ``meta_data_key``)."""
        return meta_data_key(self.leader_job, "")

    @property
    def follow(self) -> str:
        """The plugin's ``follow`` option: ``<case>/<process>``."""
        return f"{self.case}/{self.process}"

    def to_env(self) -> dict[str, str]:
        env = {name: _text(getattr(self, attr)) for attr, name in RENDEZVOUS_ENV.items()}
        return env | {PREFIX_ENV: self.meta_data_prefix}

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> FollowerRendezvous:
        """The rendezvous of this follower job; a variable missing or malformed is a one-line error naming it."""
        missing = [name for name in RENDEZVOUS_ENV.values() if not environ.get(name)]
        if missing:
            raise UsageError(
                f"a follower job needs {', '.join(missing)}", "follower steps come from their leader's upload"
            )
        values = {attr: environ[name] for attr, name in RENDEZVOUS_ENV.items()}
        try:
            seconds = float(values.pop("rendezvous_s"))
        except ValueError:
            raise UsageError(
                f"{RENDEZVOUS_ENV['rendezvous_s']}={environ[RENDEZVOUS_ENV['rendezvous_s']]!r} is not a number",
                "follower steps come from their leader's upload",
            ) from None
        return cls(**values, rendezvous_s=seconds)


def follower_steps(
    profile: Profile, case: CasePlan, leader: LeaderJob, environ: Mapping[str, str]
) -> tuple[CommandStep, ...]:
    """One step per process of ``case`` placed on another agent pool: on that pool's agents, the plugin in
    ``follow`` mode, the rendezvous and the profile's opt-in gates (taken from the leader's ``environ``; the devices
    gate is the follower agent's own) in its env, and a time limit of the rendezvous plus the whole case. No retry on
    agent loss: a lost follower fails its leader's case, and a retry would find nothing to join."""
    spec = profile.case(case.id)
    forwarded = [name for name in gate_variables(profile) if name != profile.gates.devices_env]
    gate_env = {name: environ[name] for name in forwarded if name in environ}
    seconds = profile.budgets.rendezvous_s + catalogue.case_budget_s(profile, spec.phases)
    return tuple(
        _follower_step(profile, leader, process, case.id, gate_env, seconds) for process in case.remote_processes
    )


def follower_pipeline(profile: Profile, case: CasePlan, leader: LeaderJob, environ: Mapping[str, str]) -> Pipeline:
    """What the leader uploads for ``case`` (``render(...)`` it, then ``buildkite-agent pipeline upload``)."""
    return Pipeline(follower_steps(profile, case, leader, environ))


def _follower_step(
    profile: Profile, leader: LeaderJob, process: ProcessPlan, case_id: str, gate_env: dict[str, str], seconds: float
) -> CommandStep:
    assert process.placement is not None
    rendezvous = FollowerRendezvous(
        leader.build_id, leader.job_id, case_id, process.name, process.role, profile.budgets.rendezvous_s
    )
    return CommandStep(
        label=f"afd-e2e {profile.name} {rendezvous.follow} (follower on {process.placement.pool})",
        key=f"afd-e2e-follow-{_job_tag(leader.job_id)}-{step_slug(case_id)}-{step_slug(process.name)}",
        agents=dict(process.placement.agent_tags),
        env=gate_env | rendezvous.to_env(),
        plugins={leader.plugin: {"profile": leader.profile, "follow": rendezvous.follow}},
        timeout_in_minutes=math.ceil(seconds * STEP_MARGIN / 60) + STEP_OVERHEAD_MINUTES,
        concurrency=followers_at_once(profile),
        concurrency_group=follower_concurrency_group(profile),
        concurrency_method="eager",
    )


def _job_tag(job_id: str) -> str:
    """The leader job in its followers' keys: keys are unique per build and a retried leader (a new job id) uploads
    its followers again; a digest, since Buildkite refuses a key that resembles a UUID (a job id)."""
    return hashlib.sha256(job_id.encode()).hexdigest()[:12]


def _text(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
