"""What Buildkite's job environment says about the build: the one reader of ``BUILDKITE_*``.

``BuildEnv`` is what the pipeline generator asks (why the build started, whether it is a pull request, from where);
``describe_build`` is the ``build`` record a run's results keep (the keys a trend matches runs on); the accessors
below are what the other readers ask (the job, its step, the pipeline a trend lists, Test Engine's run fields), and
the ``*_TOKEN`` names are the variables a token is read from by default. Buildkite sets ``BUILDKITE_SOURCE`` (``ui``,
``api``, ``webhook``, ``trigger_job``, ``schedule``), ``BUILDKITE_PULL_REQUEST`` (a number or ``false``) and
``BUILDKITE_PULL_REQUEST_REPO`` (the pull request's head repository, which differs from ``BUILDKITE_REPO`` for a
fork), and one ``BUILDKITE_AGENT_META_DATA_<TAG>`` per agent tag.

Why here, for the import layers (pyproject's contract): ``buildkite`` sits above ``results`` (``describe_build`` makes
its ``BuildInfo``) and below every package that asks about the build (commands, multi_agent, runner, trend, report,
pipeline), so each of them imports this module. The packages below it (workloads, system, results, ...) never read
the build's variables: what they need comes from above as a value (results' ``BuildInfo``, made here), and
``system/child_env.py`` keeps the agent's credentials out of a child's environment by their names' shape, not by
reading them. ``tests/unit/foundation/test_buildkite_env_reader.py`` fails when another module names a
``BUILDKITE`` variable in its code.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

from afd_e2e.errors import UsageError
from afd_e2e.results.model import BuildInfo

SCHEDULE = "schedule"
AGENT_TAG_PREFIX = "BUILDKITE_AGENT_META_DATA_"
BUILDKITE = "BUILDKITE"  # "true" inside a Buildkite job
BUILD_ID = "BUILDKITE_BUILD_ID"
JOB_ID = "BUILDKITE_JOB_ID"
ORGANIZATION_SLUG = "BUILDKITE_ORGANIZATION_SLUG"
PIPELINE_SLUG = "BUILDKITE_PIPELINE_SLUG"
BRANCH = "BUILDKITE_BRANCH"
# The variables a token is read from unless the user names another (--token-env); the agent's hooks or secrets set
# them, Buildkite does not.
API_TOKEN = "BUILDKITE_API_TOKEN"  # the trend's builds API token (read_builds, read_artifacts)
AGENTS_API_TOKEN = "BUILDKITE_AGENTS_API_TOKEN"  # the pipeline generator's agents API token (read_agents)
# run_env[...] fields Test Engine wants, from the job's Buildkite variables.
_TEST_ENGINE_RUN_ENV = {
    "key": BUILD_ID,
    "url": "BUILDKITE_BUILD_URL",
    "branch": BRANCH,
    "commit_sha": "BUILDKITE_COMMIT",
    "number": "BUILDKITE_BUILD_NUMBER",
    "job_id": JOB_ID,
    "message": "BUILDKITE_MESSAGE",
}


def inside_buildkite(env: Mapping[str, str]) -> bool:
    return env.get(BUILDKITE) == "true"


def buildkite_agent(env: Mapping[str, str]) -> str | None:
    """BUILDKITE_AGENT_NAME; None outside Buildkite."""
    return env.get("BUILDKITE_AGENT_NAME") or None


def agent_name(env: Mapping[str, str]) -> str:
    """BUILDKITE_AGENT_NAME, else the host's name (a run by hand)."""
    return buildkite_agent(env) or socket.gethostname()


def build_id(env: Mapping[str, str]) -> str | None:
    return env.get(BUILD_ID) or None


def job_id(env: Mapping[str, str]) -> str | None:
    return env.get(JOB_ID) or None


def step_key(env: Mapping[str, str]) -> str | None:
    """The key of the job's step (a retry keeps it); None for a keyless step or outside Buildkite."""
    return env.get("BUILDKITE_STEP_KEY") or None


def build_url(env: Mapping[str, str]) -> str | None:
    return env.get("BUILDKITE_BUILD_URL") or None


def build_number(env: Mapping[str, str]) -> int | None:
    number = env.get("BUILDKITE_BUILD_NUMBER", "")
    return int(number) if number.isdigit() else None


def organization_slug(env: Mapping[str, str]) -> str:
    """The organization's slug; '' outside Buildkite."""
    return env.get(ORGANIZATION_SLUG, "")


@dataclass(frozen=True)
class BuildPipeline:
    """The organization, pipeline and branch of the build, each set (what a trend lists earlier builds of)."""

    organization: str
    pipeline: str
    branch: str


def current_pipeline(env: Mapping[str, str], fix: str) -> BuildPipeline:
    """The build's pipeline; a UsageError naming the first variable that is not set, with ``fix``."""
    values = [env.get(name, "") for name in (ORGANIZATION_SLUG, PIPELINE_SLUG, BRANCH)]
    for name, value in zip((ORGANIZATION_SLUG, PIPELINE_SLUG, BRANCH), values, strict=True):
        if not value:
            raise UsageError(f"{name} is not set", fix)
    return BuildPipeline(*values)


def test_engine_run_env(env: Mapping[str, str]) -> dict[str, str]:
    """Test Engine's ``run_env[...]`` fields this job's variables fill (those not set are left out)."""
    return {f"run_env[{field}]": env[name] for field, name in _TEST_ENGINE_RUN_ENV.items() if env.get(name)}


def pull_request(environ: Mapping[str, str]) -> str | None:
    """The pull request's number; None when the build is not for one (Buildkite says ``false``)."""
    value = environ.get("BUILDKITE_PULL_REQUEST", "")
    return value if value not in ("", "false") else None


def describe_build(environ: Mapping[str, str]) -> BuildInfo | None:
    """The Buildkite build and job a run belongs to; None outside one."""
    if not inside_buildkite(environ) and not build_id(environ):
        return None
    return BuildInfo(
        build_number=build_number(environ),
        build_id=build_id(environ),
        build_url=build_url(environ),
        job_id=job_id(environ),
        pipeline_slug=environ.get(PIPELINE_SLUG) or None,
        organization_slug=organization_slug(environ) or None,
        branch=environ.get(BRANCH) or None,
        commit=environ.get("BUILDKITE_COMMIT") or None,
        source=environ.get("BUILDKITE_SOURCE") or None,
        pull_request=pull_request(environ),
        agent_name=buildkite_agent(environ),
        agent_tags={
            name[len(AGENT_TAG_PREFIX) :].lower(): value
            for name, value in sorted(environ.items())
            if name.startswith(AGENT_TAG_PREFIX)
        },
    )


@dataclass(frozen=True)
class BuildEnv:
    source: str = ""
    branch: str = ""
    pull_request: str | None = None
    pull_request_repo: str = ""
    repo: str = ""
    variables: Mapping[str, str] = field(default_factory=dict)  # the whole environment, for the opt-in gates

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> BuildEnv:
        return cls(
            source=environ.get("BUILDKITE_SOURCE", ""),
            branch=environ.get(BRANCH, ""),
            pull_request=pull_request(environ),
            pull_request_repo=environ.get("BUILDKITE_PULL_REQUEST_REPO", ""),
            repo=environ.get("BUILDKITE_REPO", ""),
            variables=dict(environ),
        )

    @property
    def is_scheduled(self) -> bool:
        return self.source == SCHEDULE

    @property
    def is_fork(self) -> bool:
        """A pull request whose head repository is not this one; an unknown head repository counts as a fork."""
        return self.pull_request is not None and not same_repository(self.pull_request_repo, self.repo)

    def describe(self) -> str:
        """``pull request #12 of branch x from a fork (github.com/a/b)``, ``scheduled build of main``..."""
        on_branch = f" of branch {self.branch}" if self.branch else ""
        if self.pull_request is not None:
            origin = f" from a fork ({repository_id(self.pull_request_repo) or 'unknown repository'})"
            return f"pull request #{self.pull_request}{on_branch}{origin if self.is_fork else ''}"
        if self.is_scheduled:
            return f"scheduled build{on_branch}"
        kinds = {
            "ui": "manual build (ui)",
            "api": "manual build (api)",
            "trigger_job": "triggered build",
            "": "build outside Buildkite",
        }
        return f"{kinds.get(self.source, f'{self.source} build')}{on_branch}"


def repository_id(url: str) -> str:
    """``host/owner/name`` of a git URL in any of its spellings (https, ssh, scp-like ``git@host:owner/name.git``)."""
    text = url.strip().lower()
    text = re.sub(r"^[a-z+]+://", "", text)  # scheme
    text = re.sub(r"^[^@/]+@", "", text)  # user@
    text = re.sub(r"^([^/:]+):(?!\d+/)", r"\1/", text)  # scp-like host:path (but keep host:port)
    text = re.sub(r":\d+/", "/", text)  # port
    return re.sub(r"(\.git)?/*$", "", text)


def same_repository(a: str, b: str) -> bool:
    return bool(a) and repository_id(a) == repository_id(b)
