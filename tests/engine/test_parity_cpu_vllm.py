"""Parity by logprob closeness on the real CPU vLLM: the gate fails for a real cause and passes numeric noise.

Three real servers of the tiny model (``tests/fixtures/parity/record_tiny_cpu.py``, which also records the unit
tests' fixture): bf16 as shipped, the same weights in fp32 (numeric noise), and a checkpoint whose ``lm_head`` rows
are shuffled (wrong weights). Each is asked the parity prompts for greedy tokens with top-5 logprobs through the
harness's own client.

Two vLLM launches of its own (fp32, shuffled head: configurations nothing else serves). bf16 is tiny-cpu's cpu-tp1
as shipped: its outputs are the parity records of the session's shared run (``tiny_cpu_run``), whose parity phase
asked these prompts through the same client.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace

import pytest

from afd_e2e.profile import load_profile
from afd_e2e.report.annotation import render_annotation
from afd_e2e.results import parity_records
from afd_e2e.results.codec import from_json
from afd_e2e.results.parity_records import ParityOutput
from afd_e2e.results.status import ParityVerdict, Status
from afd_e2e.workloads.parity import compare_outputs, parity_spec
from fixtures.parity.record_tiny_cpu import PROMPTS, record
from results_docs import load_fixture, typed

# the most vLLM servers this module starts (tests/launch_counter.py): fp32 and the shuffled head: configurations
# nothing else serves
LAUNCHES = 2

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM (scripts/install-cpu-vllm)"),
]
PORT_BASE = 19800  # this module's ports: 19820 (fp32), 19840 (shuffled lm_head)
SPEC = replace(parity_spec(load_profile("tiny-cpu")), prompts=PROMPTS)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, tiny_cpu_run):
    outputs = record(tmp_path_factory.mktemp("parity-cpu"), port_base=PORT_BASE, names=("fp32", "shuffled-head"))
    records = tiny_cpu_run.results.case("cpu-tp1").section(parity_records.RECORDS)
    bf16 = [json.loads(line) for line in (tiny_cpu_run.out / records).read_text(encoding="utf-8").splitlines()]
    return {"bf16": [from_json(ParityOutput, output) for output in bf16], **outputs}


def test_outputs_carry_top_k_logprobs_by_token_id(recorded):
    for case_id, outputs in recorded.items():
        assert [o.prompt for o in outputs] == list(PROMPTS), case_id
        for output in outputs:
            assert output.error is None and output.token_ids and output.top_logprobs and output.token_texts
            assert len(output.top_logprobs) == len(output.token_texts) == len(output.token_ids)
            for token, top in zip(output.token_ids, output.top_logprobs, strict=True):
                assert SPEC.top_logprobs <= len(top) <= SPEC.top_logprobs + 1 and str(token) in top
                assert top[str(token)] == max(top.values())  # greedy: the chosen token is the most likely


def test_wrong_weights_fail_the_parity_gate_naming_both_tokens(recorded):
    result = compare_outputs(SPEC, "bf16", recorded["bf16"], "shuffled-head", recorded["shuffled-head"])
    assert result.status is Status.FAILED and result.different >= 1
    assert "prompts differ beyond the top-5 logprobs; different at token " in (result.failure or "")
    first = next(p for p in result.prompts if p.verdict is ParityVerdict.DIFFERENT)
    assert first.baseline and first.candidate
    assert f"bf16 {first.baseline.token_id} {first.baseline.text!r}" in (result.failure or "")
    assert f"vs shuffled-head {first.candidate.token_id} {first.candidate.text!r}" in (result.failure or "")
    run = typed(load_fixture("seed"))  # the seed's report, its correctness comparison replaced by this one
    run.comparisons["correctness"].set_section(parity_records.SECTION, result)
    body = render_annotation(run).body
    assert "❌ different" in body and "<details open><summary>Parity per prompt" in body


def test_numeric_noise_passes_by_closeness_and_exact_mode_is_stricter(recorded):
    close = compare_outputs(SPEC, "bf16", recorded["bf16"], "fp32", recorded["fp32"])
    assert close.status is Status.PASSED, close.failure
    exact = compare_outputs(replace(SPEC, mode="exact"), "bf16", recorded["bf16"], "fp32", recorded["fp32"])
    assert exact.identical == close.identical
    assert exact.status is (Status.FAILED if close.close else Status.PASSED)
