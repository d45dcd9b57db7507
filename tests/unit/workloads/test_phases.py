"""The phases' edges: inputs checked before any model loads, and outcomes when the server is not there."""

from __future__ import annotations

import pytest

from afd_e2e.errors import UsageError
from afd_e2e.phases.correctness import run_correctness
from afd_e2e.phases.gsm8k import check_gsm8k_inputs
from afd_e2e.phases.performance import check_performance_inputs, run_performance
from afd_e2e.profile import load_profile
from afd_e2e.results import gsm8k_records, parity_records
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.results.status import Status
from afd_e2e.workloads.context import PhaseOutcome
from afd_e2e.workloads.parity import read_outputs
from repo_paths import GSM8K_DIR
from unit.workloads.serverless_context import serverless_context

TINY = load_profile("tiny-cpu")


def check_inputs(profile, gsm8k_dir):
    check_gsm8k_inputs(profile, gsm8k_dir)
    check_performance_inputs(profile, gsm8k_dir)


def test_staged_data_and_vllm_found(monkeypatch, vllm_on_path):
    monkeypatch.delenv("AFD_E2E_GSM8K_DIR", raising=False)
    check_inputs(load_profile("qwen3.5-122b-a10b"), GSM8K_DIR)


def test_missing_dataset_named_with_its_env_var(monkeypatch, tmp_path):
    monkeypatch.delenv("AFD_E2E_GSM8K_DIR", raising=False)
    with pytest.raises(UsageError, match="AFD_E2E_GSM8K_DIR is not set"):
        check_inputs(TINY, None)
    monkeypatch.setenv("AFD_E2E_GSM8K_DIR", str(tmp_path))
    with pytest.raises(UsageError, match=r"train\.jsonl does not exist"):
        check_inputs(TINY, None)


@pytest.fixture
def flushes() -> list[int]:
    """One entry per results.json write the phase asked for."""
    return []


@pytest.fixture
def ctx_without_server(tmp_path, monkeypatch, vllm_on_path, flushes):
    monkeypatch.delenv("AFD_E2E_GSM8K_DIR", raising=False)
    return serverless_context(TINY, tmp_path, flushes, GSM8K_DIR)


def test_correctness_without_a_server_fails_with_the_reasons_recorded(ctx_without_server, flushes):
    outcome = run_correctness(ctx_without_server)
    results = ctx_without_server.case_results
    assert outcome.status is Status.FAILED and outcome.failure is not None
    assert outcome.failure.startswith("gsm8k: GET http://127.0.0.1:")
    assert "; parity: 3 requests failed; POST http://127.0.0.1:" in outcome.failure
    graded = results.section(gsm8k_records.SECTION)
    assert graded is not None and graded.status is Status.FAILED and graded.questions == []
    assert results.section(parity_records.RECORDS) == "parity/cpu-tp1.jsonl"
    assert results.section(parity_records.OUTPUTS) is None
    outputs = read_outputs(ctx_without_server.out_dir, results) or []
    assert [o.error is not None for o in outputs] == [True, True, True]
    assert flushes


def test_performance_without_a_server_fails_with_the_reason_recorded(ctx_without_server):
    outcome = run_performance(ctx_without_server)
    section = ctx_without_server.case_results.section(PERFORMANCE)
    assert outcome == PhaseOutcome(Status.FAILED, section.failure)
    assert section.failure.startswith("GET http://127.0.0.1:") and section.repetitions == []
