"""``buildkite-agent pipeline upload`` from a running job (the job's own agent, no token): how a multi-agent case's
leader adds its follower steps to the build (followers.py builds them)."""

from __future__ import annotations

import subprocess

from afd_e2e.errors import UsageError
from afd_e2e.pipeline.steps import Pipeline, render

AGENT = "buildkite-agent"
TIMEOUT_S = 60.0


def upload_pipeline(pipeline: Pipeline) -> None:
    """Add ``pipeline``'s steps to this build, right after this job's step. Written without interpolation: every
    value is literal (steps.render)."""
    argv = [AGENT, "pipeline", "upload", "--no-interpolation"]
    try:
        done = subprocess.run(
            argv, input=render(pipeline), capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(
            f"{AGENT} pipeline upload: {exc}", "run inside a Buildkite job, with buildkite-agent on PATH"
        ) from exc
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(
            f"{AGENT} pipeline upload exited {done.returncode}: {last}", "check the agent's access token and the steps"
        )
