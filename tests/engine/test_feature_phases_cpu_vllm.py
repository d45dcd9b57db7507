"""The serving checks and the replay phase against the real vLLM on the CPU (tiny-cpu's cpu-tp1 case).

Launches no server of its own: it reads the session's shared run (``tiny_cpu_run``, tests/shared_run.py), whose
cases ran the serving and replay phases, and whose ``probe`` phase asked the serving checks of cpu-tp1's live
server under a name it does not serve. The checks pass as a client would see them; they fail for a real cause (the
wrong name); replay rounds are answered and pair up with themselves, and a divergent side fails the parity rule.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
from types import SimpleNamespace

import pytest

from afd_e2e.phases import replay
from afd_e2e.results import replay_records
from afd_e2e.results.serving_records import SECTION
from afd_e2e.results.status import Status
from afd_e2e.workloads.context import PhaseOutcome
from afd_e2e.workloads.parity import parity_spec

LAUNCHES = 0  # the most vLLM servers this module starts (tests/launch_counter.py): reads the session's shared run

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM (scripts/install-cpu-vllm)"),
]


@pytest.fixture(scope="module")
def measured(tiny_cpu_run):
    right = tiny_cpu_run.results.cases["cpu-tp1"]
    serving, rounds = right.section(SECTION), right.section(replay_records.SECTION)
    outcomes = {
        "serving": PhaseOutcome(serving.status, serving.failure),
        "replay": PhaseOutcome(rounds.status, rounds.failure),
        "wrong name": tiny_cpu_run.probed.wrong_name_outcome,
    }
    return SimpleNamespace(
        out=tiny_cpu_run.out,
        right=right,
        wrong=tiny_cpu_run.probed.wrong_name,
        outcomes=outcomes,
        profile=tiny_cpu_run.profile,
    )


def test_serving_checks_pass_on_the_real_engine(measured):
    checks = {c.check: c for c in measured.right.section(SECTION).checks}
    assert list(checks) == ["completion", "usage", "unknown_model", "concurrent"]
    assert all(c.status is Status.PASSED for c in checks.values()), checks
    assert "= total" in checks["usage"].detail and "matching the token ids" in checks["usage"].detail
    assert "rejected with HTTP 404" in checks["unknown_model"].detail
    assert checks["concurrent"].detail == "4 concurrent requests all answered"
    assert measured.outcomes["serving"] == PhaseOutcome(Status.PASSED)


def test_serving_checks_fail_for_a_served_name_mismatch(measured):
    checks = {c.check: c.status for c in measured.wrong.section(SECTION).checks}
    assert checks == {"completion": "failed", "usage": "failed", "unknown_model": "passed", "concurrent": "failed"}
    outcome = measured.outcomes["wrong name"]
    assert outcome.status is Status.FAILED and "completion: HTTP 404" in outcome.failure


def test_replay_rounds_are_answered_and_compared_by_the_parity_rule(measured):
    section = measured.right.section(replay_records.SECTION)
    assert measured.outcomes["replay"].status is Status.PASSED
    assert (section.rounds, section.batch, section.answered, section.records) == (2, 4, 8, "replay/cpu-tp1.jsonl")
    assert section.requests == []  # in the side file, not in results.json
    requests = replay.read_requests(measured.out, section)
    assert [(r.round, r.index) for r in requests] == [(n, i) for n in (1, 2) for i in range(4)]
    assert all(r.output.top_logprobs and r.output.token_ids for r in requests)
    same = replay.compare_replay_requests(parity_spec(measured.profile), "a", requests, "b", requests)
    assert same.status is Status.PASSED and same.identical == same.total == 8 and same.prompts == []
    diverged = copy.deepcopy(requests)
    changed = diverged[5].output
    changed.token_ids = [*changed.token_ids[:2], -1]
    exact = dataclasses.replace(parity_spec(measured.profile), mode="exact")
    assert replay.compare_replay_requests(exact, "a", requests, "b", requests).status is Status.PASSED
    worse = replay.compare_replay_requests(exact, "a", requests, "b", diverged)
    assert worse.status is Status.FAILED and worse.identical == 7 and worse.different == 1
    [listed] = worse.prompts  # only the request that is not identical is listed
    assert listed.first_diff_token == 2
