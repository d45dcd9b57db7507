"""The serving checks and the replay phase against the real vLLM on the CPU (tiny-cpu's cpu-tp1 case).

One server: the checks pass as a client would see them; they fail for a real cause (asking for a name the server
does not serve); replay rounds are answered and pair up with themselves, and a divergent side fails the parity rule.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import os
import threading
from types import SimpleNamespace

import pytest

from afd_e2e.plan import build_plan
from afd_e2e.profile import ReplaySpec, ServingSpec, load_profile
from afd_e2e.results.model import CaseResults
from afd_e2e.results.status import Status
from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.server import CaseServers
from afd_e2e.system.child_env import client_environment
from afd_e2e.system.markers import marker_env
from afd_e2e.workloads import replay
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome
from afd_e2e.workloads.phases import run_replay, run_serving
from repo_paths import REPO

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM (scripts/install-cpu-vllm)"),
]
PORT_BASE = 19800  # this module's port: 19800 (cpu-tp1)
PROFILE = dataclasses.replace(
    load_profile("tiny-cpu"),
    serving=ServingSpec(prompt="The capital of France is", max_tokens=6, concurrency=4),
    replay=ReplaySpec(rounds=2, batch=4),
)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    from afd_e2e.tiny_model import build_tiny_model

    model = build_tiny_model(REPO / ".tiny-model")
    work = tmp_path_factory.mktemp("features-cpu")
    case = build_plan(PROFILE, model_path=str(model), case_ids=["cpu-tp1"], port_base=PORT_BASE).cases[0]
    lines: list[str] = []

    def ctx(plan_case) -> PhaseContext:
        return PhaseContext(
            profile=PROFILE,
            case=plan_case,
            case_results=CaseResults(plan_case.id, plan_case.label, plan_case.kind),
            out_dir=work / "out",
            progress=lines.append,
            cancelled=threading.Event(),
            flush=lambda: None,
            gsm8k_dir=None,
            client_env=lambda name: client_environment(os.environ, markers=marker_env("features", plan_case.id, name)),
            take_forensics=lambda _trigger, _reason: None,  # no case servers here to dump
        )

    right, wrong = ctx(case), ctx(dataclasses.replace(case, served_model_name="tiny-cpu-renamed"))
    with CaseServers(case, work / "logs", scratch=work / "scratch", cache=work / ".cache") as up:
        up.launch()
        up.wait_ready(CancelFlag())
        outcomes = {"serving": run_serving(right), "replay": run_replay(right), "wrong name": run_serving(wrong)}
    return SimpleNamespace(
        out=work / "out", right=right.case_results, wrong=wrong.case_results, outcomes=outcomes, lines=lines
    )


def test_serving_checks_pass_on_the_real_engine(measured):
    checks = {c.check: c for c in measured.right.serving.checks}
    assert list(checks) == ["completion", "usage", "unknown_model", "concurrent"]
    assert all(c.status is Status.PASSED for c in checks.values()), checks
    assert "= total" in checks["usage"].detail and "matching the token ids" in checks["usage"].detail
    assert "rejected with HTTP 404" in checks["unknown_model"].detail
    assert checks["concurrent"].detail == "4 concurrent requests all answered"
    assert measured.outcomes["serving"] == PhaseOutcome(Status.PASSED)


def test_serving_checks_fail_for_a_served_name_mismatch(measured):
    checks = {c.check: c.status for c in measured.wrong.serving.checks}
    assert checks == {"completion": "failed", "usage": "failed", "unknown_model": "passed", "concurrent": "failed"}
    outcome = measured.outcomes["wrong name"]
    assert outcome.status is Status.FAILED and "completion: HTTP 404" in outcome.failure


def test_replay_rounds_are_answered_and_compared_by_the_parity_rule(measured):
    section = measured.right.replay
    assert measured.outcomes["replay"].status is Status.PASSED
    assert (section.rounds, section.batch, section.answered, section.records) == (2, 4, 8, "replay/cpu-tp1.jsonl")
    assert section.requests == []  # in the side file, not in results.json
    requests = replay.read_requests(measured.out, section)
    assert [(r.round, r.index) for r in requests] == [(n, i) for n in (1, 2) for i in range(4)]
    assert all(r.output.top_logprobs and r.output.token_ids for r in requests)
    same = replay.compare_replay(PROFILE.parity, "a", requests, "b", requests)
    assert same.status is Status.PASSED and same.identical == same.total == 8 and same.prompts == []
    diverged = copy.deepcopy(requests)
    changed = diverged[5].output
    changed.token_ids = [*changed.token_ids[:2], -1]
    exact = dataclasses.replace(PROFILE.parity, mode="exact")
    assert replay.compare_replay(exact, "a", requests, "b", requests).status is Status.PASSED
    worse = replay.compare_replay(exact, "a", requests, "b", diverged)
    assert worse.status is Status.FAILED and worse.identical == 7 and worse.different == 1
    [listed] = worse.prompts  # only the request that is not identical is listed
    assert listed.first_diff_token == 2
