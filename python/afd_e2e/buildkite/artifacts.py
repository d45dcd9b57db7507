"""Build artifacts through ``buildkite-agent artifact`` (the job's own agent): how a multi-agent case's followers hand
their records, logs and stacks to the leader, which merges them into one report."""

from __future__ import annotations

import subprocess
from pathlib import Path

AGENT = "buildkite-agent"
TIMEOUT_S = 600.0


def _agent(cwd: Path, *args: str) -> str | None:
    """None when it worked, else one line saying what failed."""
    try:
        done = subprocess.run(
            [AGENT, "artifact", *args], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{AGENT} artifact {args[0]} {args[1]}: {exc}"
    if done.returncode:
        last = (done.stderr.strip().splitlines() or [""])[-1]
        return f"{AGENT} artifact {args[0]} {args[1]} exited {done.returncode}: {last}"
    return None


def upload_artifacts(glob: str, cwd: Path) -> str | None:
    """Upload the files ``glob`` matches below ``cwd`` (their paths relative to it)."""
    return _agent(cwd, "upload", glob)


def download_artifacts(glob: str, destination: Path) -> str | None:
    """Download this build's artifacts matching ``glob`` into ``destination`` (their paths kept below it)."""
    destination.mkdir(parents=True, exist_ok=True)
    return _agent(destination, "download", glob, ".")
