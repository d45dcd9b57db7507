"""Unit tier: the ``serving`` phase (``afd_e2e/phases/serving.py``), whole in one module: ``workloads.serving`` read by
its registered reader after the smoke's (whose prompt and length it defaults to), refused where a case lists the phase
without it, and its four checks each recorded, failed for a real cause (no server listening), in the case's
``serving`` section. The checks against the real engine are tests/engine/test_feature_phases_cpu_vllm.py's."""

from __future__ import annotations

import pytest
import yaml

from afd_e2e.errors import UsageError
from afd_e2e.phases.serving import ServingSpec, run_serving
from afd_e2e.phases.smoke import smoke_spec
from afd_e2e.profile import catalogue, parse_profile
from afd_e2e.results.serving_records import SECTION
from afd_e2e.results.status import Status
from afd_e2e.workloads.context import PhaseOutcome
from repo_paths import REPO
from unit.workloads.serverless_context import serverless_context

TINY = (REPO / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text()


def tiny_with(serving: dict | None, smoke: dict | None = None) -> dict:
    document = yaml.safe_load(TINY)
    first = document["cases"][next(iter(document["cases"]))]
    first["phases"] = [*first["phases"], "serving"]
    for key, section in (("serving", serving), ("smoke", smoke)):
        if section is not None:
            document["workloads"][key] = section
    return document


def test_its_keys_default_to_the_smokes_prompt_and_length():
    assert catalogue.phase_names().index("smoke") < catalogue.phase_names().index("serving")
    profile = parse_profile(tiny_with({}, smoke={"prompt": "Hello", "max_tokens": 5}), "x.yaml")
    assert profile.workloads["serving"] == ServingSpec("Hello", 5, 4)
    given = parse_profile(tiny_with({"prompt": "Hi", "max_tokens": 3, "concurrency": 2}), "x.yaml")
    assert given.workloads["serving"] == ServingSpec("Hi", 3, 2)
    assert smoke_spec(given).prompt != "Hi"


def test_a_case_that_lists_it_without_workloads_serving_is_refused():
    with pytest.raises(UsageError, match=r"serving phase without workloads\.serving"):
        parse_profile(tiny_with(None), "x.yaml")


def test_without_a_server_every_check_is_recorded_failed(tmp_path):
    flushes: list[int] = []
    ctx = serverless_context(parse_profile(tiny_with({"concurrency": 2}), "x.yaml"), tmp_path, flushes, None)
    outcome = run_serving(ctx)
    section = ctx.case_results.section(SECTION)
    assert [(c.check, c.status) for c in section.checks] == [
        ("completion", Status.FAILED),
        ("usage", Status.FAILED),
        ("unknown_model", Status.FAILED),
        ("concurrent", Status.FAILED),
    ]
    assert outcome == PhaseOutcome(Status.FAILED, section.failure) and flushes == [1]
    assert section.failure.startswith("completion: POST /v1/completions: ConnectionError")
    assert "concurrent: 2 of 2 concurrent requests failed" in section.failure
