"""Engine tier: the execution section on the real CPU vLLM. Compiled (no ``--enforce-eager``) and eager are each
``proven``; a case whose profile asks compiled but whose engine a ``vllm`` wrapper forces eager (an argument the
harness does not control, injected through a variable only the wrapper reads) is ``contradicted`` and fails with
the engine's own line.

Two vLLM launches: the session's ``execution_run`` (``tests/engine/conftest.py``), one ``afd-e2e run`` of two cases,
compiled and forced-eager (each start-up is the evidence, and neither configuration is shared). Eager is tiny-cpu's
cpu-tp1 as shipped: its execution section is read from the session's shared run (``tiny_cpu_run``), which launched
exactly that server. Ports 21600, 21620. The compiled case, after its smoke, also sweeps capacity under a budget that
runs out: ``test_capacity_cpu_vllm.py``'s cut-short sweep, on this launch instead of one of its own (it cost that
module ~60 s of CI's critical path); the case passes as before (what a cut-short sweep measured stands).

Every role records the model runner it asked (the profile's, V1) and the one its log shows (vLLM 0.32's CPU backend:
V1; it refuses V2 without Triton, so two runners cannot meet on this engine: the mismatch verdict is the GPU tier's
and the unit tier's, on real GPU logs), and the comparison between the two cases says both ran V1.
"""

from __future__ import annotations

import importlib.util

import pytest

from afd_e2e.results.status import Proof, Status

# the most vLLM servers this module starts (tests/launch_counter.py): its two cases are the session's execution_run
# (conftest.py)
LAUNCHES = 0

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM (scripts/install-cpu-vllm)"),
]


@pytest.fixture
def run(execution_run):
    return execution_run


def _role(results, case_id):
    section = results.case(case_id).section("execution")
    assert section is not None, results.case(case_id).failure
    (role,) = section.roles
    return role


def test_compiled_and_eager_cases_are_proven(run, tiny_cpu_run):
    _, results = run
    shared = tiny_cpu_run.results  # its cpu-tp1 is the eager case: tiny-cpu as shipped
    compiled, eager = _role(results, "cpu-compiled"), _role(shared, "cpu-tp1")
    assert compiled.asked.mode == "compiled" and compiled.proof is Proof.PROVEN, compiled.reason
    assert compiled.startup.compiled and compiled.startup.engine_compile_mode != "NONE"
    assert eager.asked.mode == "eager" and eager.proof is Proof.PROVEN, eager.reason
    assert "Enforce eager set" in eager.reason
    for case in (results.case("cpu-compiled"), shared.case("cpu-tp1")):
        assert case.status is Status.PASSED, case.failure


def test_a_compiled_case_forced_eager_behind_the_harness_is_contradicted_and_fails(run):
    done, results = run
    role = _role(results, "cpu-forced-eager")
    assert role.asked.mode == "compiled" and role.proof is Proof.CONTRADICTED
    case = results.case("cpu-forced-eager")
    assert case.status is Status.FAILED and done.returncode == 1
    assert case.failure.startswith("execution: server role asked compiled") and "Enforce eager set" in case.failure
    assert "--enforce-eager" not in results.case("cpu-forced-eager").processes[0].argv  # not the harness's doing


def test_every_role_records_its_runner_and_the_comparison_names_it(run, tiny_cpu_run):
    _, results = run
    for role in (
        _role(results, "cpu-compiled"),
        _role(results, "cpu-forced-eager"),
        _role(tiny_cpu_run.results, "cpu-tp1"),
    ):
        assert (role.asked.model_runner, role.startup.model_runner) == ("v1", "v1"), role.startup.lines
        assert any("cpu_model_runner.py" in line for line in role.startup.lines)
    runners = results.comparisons["runners"].model_runners
    assert runners is not None and runners.status is Status.PASSED and runners.text == "both sides ran model runner V1"
