"""Unit tier: the execution verdicts on real CPU vLLM start-up logs (``tests/fixtures/execution/cpu``, made by
``record_tiny_cpu.py``): compiled and eager are proven, a compiled case forced eager behind the harness is
contradicted; what a role's argv asks; the gates (unproven warns, or fails under ``require_proof``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from afd_e2e.execution.asked import asked_of
from afd_e2e.execution.judge import judge_case, judge_role
from afd_e2e.execution.startup import read_startup
from afd_e2e.plan.model import RunPlan
from afd_e2e.results.codec import from_json
from afd_e2e.results.status import Proof, Status
from repo_paths import FIXTURES

CPU = FIXTURES / "execution" / "cpu"


def _plan(folder: Path) -> RunPlan:
    return from_json(RunPlan, json.loads((folder / "plan.json").read_text(encoding="utf-8")))


def _judged(case_id: str, require_proof: bool = True, logs: dict | None = None):
    plan = _plan(CPU)
    case = next(c for c in plan.cases if c.id == case_id)
    return judge_case(
        case, plan.platform, CPU, {"server": f"{case_id}/server.log"} if logs is None else logs, require_proof
    )


def test_the_compiled_case_is_proven_by_its_compilation_line():
    section = _judged("cpu-compiled")
    (role,) = section.roles
    assert (role.asked.mode, role.proof, section.status) == ("compiled", Proof.PROVEN, Status.PASSED)
    assert role.startup.engine_compile_mode == "DYNAMO_TRACE_ONCE" and role.startup.engine_cudagraph_mode == "NONE"
    assert "saved AOT compiled function" in role.reason and role.startup.eager is None


def test_the_eager_case_is_proven_by_the_engines_eager_line():
    (role,) = _judged("cpu-eager").roles
    assert (role.asked.mode, role.proof) == ("eager", Proof.PROVEN)
    assert "Enforce eager set, disabling torch.compile" in role.reason and role.startup.compiled is False


def test_a_compiled_case_forced_eager_is_contradicted_and_fails_with_the_line():
    section = _judged("cpu-forced-eager", require_proof=False)
    (role,) = section.roles
    assert (role.asked.mode, role.proof, section.status) == ("compiled", Proof.CONTRADICTED, Status.FAILED)
    assert section.failure.startswith(
        "server role asked compiled, no CUDA graphs (CPU), model runner V1: contradicted, log shows"
    )
    assert "Enforce eager set" in section.failure


def test_the_eager_log_contradicts_an_eager_claim_only_when_it_compiled():
    """The compiled case's log read as if eager had been asked: its compilation line contradicts it."""
    text = (CPU / "cpu-compiled" / "server.log").read_text(encoding="utf-8")
    evidence = read_startup(text, "cpu-compiled/server.log")

    proof, reason, _ = judge_role(asked_of(["--enforce-eager"], "cpu"), evidence, None)
    assert proof is Proof.CONTRADICTED and "saved AOT compiled function" in reason


@pytest.mark.parametrize(("require", "status"), [(True, Status.FAILED), (False, Status.WARNED)])
def test_no_log_is_unproven_a_warning_unless_proof_is_required(require, status):
    section = _judged("cpu-compiled", require_proof=require, logs={})
    (role,) = section.roles
    assert role.proof is Proof.UNPROVEN and section.status is status
    assert "no start-up log here" in role.reason and "Compiling a graph" in role.would_prove


def test_evidence_lines_are_few_and_cut():
    (role,) = _judged("cpu-eager").roles
    assert 1 <= len(role.startup.lines) <= 6 and all(len(line) < 340 for line in role.startup.lines)


@pytest.mark.parametrize(
    ("argv", "platform", "mode", "text"),
    [
        (["--enforce-eager"], "cuda", "eager", "eager (--enforce-eager)"),
        ([], "cpu", "compiled", "compiled, no CUDA graphs (CPU)"),
        ([], "cuda", "cuda graphs", "compiled, CUDA graphs FULL_AND_PIECEWISE (default) at the default sizes"),
        (
            [
                "--cudagraph-capture-sizes=64",
                '--compilation-config={"cudagraph_mode":"FULL_DECODE_ONLY"}',
                "--enable-dbo",
            ],
            "cuda",
            "cuda graphs",
            "compiled, CUDA graphs FULL_DECODE_ONLY at 1 size (64), DBO",
        ),
        (['--compilation-config={"cudagraph_mode":"NONE"}'], "cuda", "compiled", "compiled, CUDA graphs off"),
        (["-O", "0"], "cuda", "eager", "eager (compile mode NONE)"),
        (
            ["--enforce-eager", "--additional-config", '{"afd":{"role":"ffn","connector":"P2pNcclAFDConnector"}}'],
            "cuda",
            "eager",
            "eager (--enforce-eager), AFD connector P2pNcclAFDConnector",
        ),
    ],
)
def test_what_a_roles_argv_asks(argv, platform, mode, text):
    asked = asked_of(argv, platform)
    assert (asked.mode, asked.text) == (mode, text)
