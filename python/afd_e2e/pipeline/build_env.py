"""What Buildkite tells the generator about the build: why it started, whether it is a pull request, from where.

Buildkite sets ``BUILDKITE_SOURCE`` (``ui``, ``api``, ``webhook``, ``trigger_job``, ``schedule``),
``BUILDKITE_PULL_REQUEST`` (a number or ``false``) and ``BUILDKITE_PULL_REQUEST_REPO`` (the pull request's head
repository, which differs from ``BUILDKITE_REPO`` for a fork).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

SCHEDULE = "schedule"


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
        pull_request = environ.get("BUILDKITE_PULL_REQUEST", "")
        return cls(
            source=environ.get("BUILDKITE_SOURCE", ""),
            branch=environ.get("BUILDKITE_BRANCH", ""),
            pull_request=pull_request if pull_request not in ("", "false") else None,
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
