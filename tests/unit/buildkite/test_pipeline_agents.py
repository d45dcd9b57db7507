"""Matching agents' meta-data against a profile's agent_tags."""

from __future__ import annotations

import pytest

from afd_e2e.pipeline.agents import FOUND, NONE, Agent, agent_matches, availability

WANTED = {"queue": "large-model", "gpus": "8"}


@pytest.mark.parametrize(
    ("meta_data", "wanted", "matches"),
    [
        (["queue=large-model", "gpus=8"], WANTED, True),
        (["queue=large-model", "gpus=8", "os=linux"], WANTED, True),
        (["queue=large-model", "gpus=4"], WANTED, False),
        (["queue=large-model"], WANTED, False),
        (["queue=default", "gpus=8"], WANTED, False),
        (["queue=large-model", "gpus=8"], {"queue": "large-model", "gpus": "*"}, True),
        (["queue=large-model"], {"queue": "large-model", "gpus": "*"}, False),
        (["queue=large-model-2"], {"queue": "large-model*"}, True),
        (["queue=x=y"], {"queue": "x=y"}, True),
        (["malformed", "queue=a"], {"queue": "a"}, True),
        ([], {}, True),
    ],
)
def test_agent_matches(meta_data, wanted, matches):
    assert agent_matches(meta_data, wanted) is matches


def test_only_connected_agents_count_and_are_named():
    agents = [
        Agent("gpu-1", "connected", ("queue=large-model", "gpus=8")),
        Agent("gpu-2", "disconnected", ("queue=large-model", "gpus=8")),
        Agent("cpu-1", "connected", ("queue=default",)),
    ]
    found = availability(agents, WANTED)
    assert found.status == FOUND
    assert found.detail == "1 connected agent(s) have gpus=8, queue=large-model: gpu-1"


def test_none_says_what_was_looked_for():
    found = availability([Agent("cpu-1", "connected", ("queue=default",))], WANTED)
    assert found.status == NONE
    assert found.detail == "no connected agent has gpus=8, queue=large-model (1 connected agents checked)"


def test_many_matches_are_summarised():
    agents = [Agent(f"gpu-{i}", "connected", ("queue=large-model", "gpus=8")) for i in range(7)]
    assert availability(agents, WANTED).detail.endswith("gpu-0, gpu-1, gpu-2, gpu-3, gpu-4 and 2 more")
