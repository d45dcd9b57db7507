"""Build meta-data through ``buildkite-agent meta-data`` (the job's own agent, no token): where a multi-agent case's
leader and followers leave their state, addresses and identities for each other."""

from __future__ import annotations

import subprocess

from afd_e2e.errors import UsageError

AGENT = "buildkite-agent"
TIMEOUT_S = 30.0
UNSET = "afd-e2e:unset"  # what a missing key answers with: no value afd-e2e writes looks like it


def _agent(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [AGENT, "meta-data", *args], input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(
            f"{AGENT} meta-data {args[0]}: {exc}", "run inside a Buildkite job, with buildkite-agent on PATH"
        ) from exc


def get(key: str) -> str | None:
    """The value under ``key`` in this build, or None when nothing was set there: one call (``--default`` answers
    for a missing key), not ``exists`` then ``get``, since followers and leaders poll (benchmarks/meta_data_calls.py)."""
    done = _agent("get", key, "--default", UNSET)
    if done.returncode != 0:
        raise UsageError(f"{AGENT} meta-data get {key} exited {done.returncode}", "check the agent's access token")
    value = done.stdout.rstrip("\n")
    return None if value == UNSET else value


def set_value(key: str, value: str) -> None:
    done = _agent("set", key, stdin=value)
    if done.returncode != 0:
        raise UsageError(f"{AGENT} meta-data set {key} exited {done.returncode}", "check the agent's access token")
