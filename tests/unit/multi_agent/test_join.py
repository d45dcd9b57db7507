"""A follower joins only a leader that still waits for it: the pure decision, and ``afd-e2e join`` reading the
leader's state from build meta-data (the buildkite-agent stub with a shared store)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from afd_e2e.buildkite import meta_data
from afd_e2e.errors import EXIT_NOT_RUN, EXIT_PASSED
from afd_e2e.multi_agent.lifecycle import RUNNING, WAITING, ended, join_decision, leader_state_key
from repo_paths import REPO


@pytest.mark.parametrize(("state", "join"), [(WAITING, True), (RUNNING, True)])
def test_a_waiting_or_running_leader_is_joined(state, join):
    decision = join_decision("job-7", state)
    assert decision.join is join and decision.reason == f"leader job job-7 is {state}: joining its rendezvous"


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (ended("failed"), "leader job job-7 has already ended (failed): nothing to join"),
        (ended("cancelled"), "leader job job-7 has already ended (cancelled): nothing to join"),
        (None, "leader job job-7 published no state: nothing to join"),
        ("", "leader job job-7 published no state: nothing to join"),
        ("dancing", "leader job job-7 is in an unknown state 'dancing': nothing to join"),
    ],
)
def test_anything_else_leaves_nothing_to_join(state, reason):
    decision = join_decision("job-7", state)
    assert not decision.join and decision.reason == reason


def join(leader_job: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "afd_e2e", "join", "--leader-job", leader_job],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO / "python")},
    )


def test_meta_data_round_trips_through_the_agent(build):
    assert meta_data.get("afd-e2e/job-1/leader") is None
    meta_data.set_value("afd-e2e/job-1/leader", "waiting\nwith a second line")
    assert meta_data.get("afd-e2e/job-1/leader") == "waiting\nwith a second line"


def test_join_follows_the_leader_through_its_life(build):
    result = join("job-7")
    assert (result.returncode, result.stdout) == (
        EXIT_NOT_RUN,
        "afd-e2e join: leader job job-7 published no state: nothing to join\n",
    )
    meta_data.set_value(leader_state_key("job-7"), WAITING)
    assert join("job-7").returncode == EXIT_PASSED
    meta_data.set_value(leader_state_key("job-7"), ended("passed"))
    result = join("job-7")
    assert result.returncode == EXIT_NOT_RUN and "has already ended (passed): nothing to join" in result.stdout
    # Another leader's state (a retried job, another profile's case) is not this one's.
    assert join("job-8").returncode == EXIT_NOT_RUN


def test_join_without_an_agent_is_a_one_line_error(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "afd_e2e", "join", "--leader-job", "job-7"],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(tmp_path), "PYTHONPATH": str(REPO / "python")},
    )
    assert result.returncode == 2
    assert result.stderr.startswith("afd-e2e join: error: buildkite-agent meta-data get:")
    assert "fix: run inside a Buildkite job, with buildkite-agent on PATH" in result.stderr
