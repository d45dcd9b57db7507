"""The first-parent commit list from the good revision to the bad one, read with git (``git rev-list``).

First-parent, as ``git bisect start --first-parent``: a merged branch's inner commits were never what the main line
shipped, and each of them may not even build; the merge commit is the one to blame.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from afd_e2e.errors import UsageError
from afd_e2e.results.bisect_records import CommitRef

GIT_TIMEOUT_S = 60.0
PACKAGE_FILES = ("pyproject.toml", "setup.py")  # what pip builds a package from, at the repository's root


def _git(repo: Path, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        raise UsageError("git is not on PATH", "install git, which bisect reads the commit list with") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise UsageError(f"git {' '.join(args)} in {repo} failed: {last}", "check --repo and the revisions")
    return done.stdout


def resolve_sha(repo: Path, rev: str, flag: str) -> str:
    """The full sha of ``rev`` (a branch, tag or sha) in ``repo``."""
    if not _is_git(repo):
        raise UsageError(f"--repo {repo} is not a git repository", "pass the checkout of the package to bisect")
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()
    except UsageError:
        raise UsageError(f"{flag} {rev!r} is not a commit of {repo}", f"pass a sha, branch or tag to {flag}") from None


def _is_git(repo: Path) -> bool:
    try:
        return _git(repo, "rev-parse", "--is-inside-work-tree").strip() == "true"
    except UsageError:
        return False


def first_parent_commits(repo: Path, good: str, bad: str) -> list[CommitRef]:
    """The good commit, then every first-parent commit after it up to the bad one, oldest first."""
    good_sha, bad_sha = resolve_sha(repo, good, "--good"), resolve_sha(repo, bad, "--bad")
    if good_sha == bad_sha:
        raise UsageError(f"--good and --bad are the same commit {good_sha[:12]}", "pass an older --good")
    listed = _git(repo, "rev-list", "--first-parent", "--reverse", "--format=%H %s", f"{good_sha}..{bad_sha}")
    commits = [CommitRef(good_sha, _subject(repo, good_sha))]
    for line in listed.splitlines():
        if line.startswith("commit "):
            continue
        sha, _, subject = line.partition(" ")
        commits.append(CommitRef(sha, subject))
    if commits[-1].sha != bad_sha or not _on_first_parent_line(repo, good_sha, bad_sha):
        raise UsageError(
            f"--good {good} is not on the first-parent line of --bad {bad}",
            "pass a --good that --bad's main line descends from (git log --first-parent --bad)",
        )
    return commits


def _on_first_parent_line(repo: Path, good_sha: str, bad_sha: str) -> bool:
    line = _git(repo, "rev-list", "--first-parent", bad_sha).split()
    return good_sha in line


def _subject(repo: Path, sha: str) -> str:
    return _git(repo, "log", "-1", "--format=%s", sha).strip()


def check_installable(repo: Path, commits: Sequence[CommitRef]) -> None:
    """Both ends of the range hold a package pip can install (``PACKAGE_FILES`` at the root): without one, every
    probe would fail to install, found only once the search has started."""
    for flag, commit in (("--good", commits[0]), ("--bad", commits[-1])):
        root = set(_git(repo, "ls-tree", "--name-only", commit.sha).splitlines())
        if not root.intersection(PACKAGE_FILES):
            raise UsageError(
                f"--repo {repo} has no {' or '.join(PACKAGE_FILES)} at its root at {flag} {commit.sha[:12]}: "
                "pip cannot install it",
                "pass the git checkout of a pip-installable package (the plugin's repository)",
            )
