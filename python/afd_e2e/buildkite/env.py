"""What Buildkite's job environment says about the build: the one reader of ``BUILDKITE_*``.

``BuildEnv`` is what the pipeline generator asks (why the build started, whether it is a pull request, from where);
``describe_build`` is the ``build`` record a run's results keep (the keys a trend matches runs on). Buildkite sets
``BUILDKITE_SOURCE`` (``ui``, ``api``, ``webhook``, ``trigger_job``, ``schedule``), ``BUILDKITE_PULL_REQUEST`` (a
number or ``false``) and ``BUILDKITE_PULL_REQUEST_REPO`` (the pull request's head repository, which differs from
``BUILDKITE_REPO`` for a fork), and one ``BUILDKITE_AGENT_META_DATA_<TAG>`` per agent tag.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

from afd_e2e.results.model import BuildInfo

SCHEDULE = "schedule"
AGENT_TAG_PREFIX = "BUILDKITE_AGENT_META_DATA_"


def agent_name(env: Mapping[str, str]) -> str:
    """BUILDKITE_AGENT_NAME, else the host's name (a run by hand)."""
    return env.get("BUILDKITE_AGENT_NAME") or socket.gethostname()


def job_id(env: Mapping[str, str]) -> str | None:
    return env.get("BUILDKITE_JOB_ID") or None


def pull_request(environ: Mapping[str, str]) -> str | None:
    """The pull request's number; None when the build is not for one (Buildkite says ``false``)."""
    value = environ.get("BUILDKITE_PULL_REQUEST", "")
    return value if value not in ("", "false") else None


def describe_build(environ: Mapping[str, str]) -> BuildInfo | None:
    """The Buildkite build and job a run belongs to; None outside one."""
    if environ.get("BUILDKITE") != "true" and not environ.get("BUILDKITE_BUILD_ID"):
        return None
    number = environ.get("BUILDKITE_BUILD_NUMBER", "")
    return BuildInfo(
        build_number=int(number) if number.isdigit() else None,
        build_id=environ.get("BUILDKITE_BUILD_ID") or None,
        build_url=environ.get("BUILDKITE_BUILD_URL") or None,
        job_id=environ.get("BUILDKITE_JOB_ID") or None,
        pipeline_slug=environ.get("BUILDKITE_PIPELINE_SLUG") or None,
        organization_slug=environ.get("BUILDKITE_ORGANIZATION_SLUG") or None,
        branch=environ.get("BUILDKITE_BRANCH") or None,
        commit=environ.get("BUILDKITE_COMMIT") or None,
        source=environ.get("BUILDKITE_SOURCE") or None,
        pull_request=pull_request(environ),
        agent_name=environ.get("BUILDKITE_AGENT_NAME") or None,
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
            branch=environ.get("BUILDKITE_BRANCH", ""),
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
