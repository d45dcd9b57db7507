"""Unit tier: the model runner, asked and shown. Every child of a profile, native included, starts with the
profile's runner (V1 by default); each role's runner is read from its own log (the 12-05 H200 logs of
``vllm serve`` on the tiny DeepSeek-V2: vLLM 0.26's own choice V2, V2 asked with the MRV2 flags, V1 asked,
``tests/fixtures/execution/gpu/model-runner-serve-logs.txt``, copied from ``../shared/fixtures/gpu/runs-2026-12-05``);
a role that ran another runner than it asked is contradicted; a comparison whose sides ran different runners fails
unless the cases declare the difference."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import yaml

from afd_e2e.errors import UsageError
from afd_e2e.execution.asked import asked_of
from afd_e2e.execution.judge import judge_runner
from afd_e2e.execution.runners import match_model_runners, match_runners
from afd_e2e.execution.startup import read_startup
from afd_e2e.plan import build_plan
from afd_e2e.profile.section_readers import parse_profile
from afd_e2e.report.junit import build_testcases
from afd_e2e.results.execution_records import CaseExecution, ExecutionAsked, RoleExecution, StartupEvidence
from afd_e2e.results.status import Proof, Status
from afd_e2e.runner.verdict import decide_verdict
from repo_paths import FIXTURES, REPO
from results_docs import load_fixture, typed

LOGS = FIXTURES / "execution" / "gpu" / "model-runner-serve-logs.txt"
RUNNER = "VLLM_USE_V2_MODEL_RUNNER"


def _sections() -> dict[str, str]:
    """The fixture's three logs by name (``######## default: ...`` starts each)."""
    out: dict[str, list[str]] = {}
    name = ""
    for line in LOGS.read_text(encoding="utf-8").splitlines():
        if line.startswith("######## "):
            name = line.split()[1].rstrip(":")
            out[name] = []
        elif name:
            out[name].append(line)
    return {key: "\n".join(lines) for key, lines in out.items()}


@pytest.mark.parametrize(
    ("section", "runner", "line"),
    [
        ("default", "v2", "Using V2 Model Runner"),  # no variable: vLLM 0.26 picks V2 for DeepseekV2ForCausalLM
        ("v2", "v2", "Using V2 Model Runner"),  # VLLM_USE_V2_MODEL_RUNNER=1 with the MRV2 flags
        ("v1", "v1", "[gpu_model_runner.py"),  # VLLM_USE_V2_MODEL_RUNNER=0
    ],
)
def test_the_runner_is_read_from_each_log(section, runner, line):
    logs = _sections()
    assert set(logs) == {"default", "v2", "v1"}
    startup = read_startup(logs[section], f"{section}.log")
    assert startup.model_runner == runner
    assert any(line in kept for kept in startup.lines)
    assert startup.eager is True  # the runner's line does not displace the mode's evidence


def test_a_log_that_names_no_runner_leaves_it_unknown():
    startup = read_startup("(EngineCore pid=1) INFO [core.py:116] Initializing a V1 LLM engine (v0.26.0)\n", "x.log")
    assert startup.model_runner is None  # "V1 LLM engine" names the engine, not the runner


def test_a_role_that_ran_another_runner_than_it_asked_is_contradicted_with_the_line():
    logs = _sections()
    asked = asked_of(["--enforce-eager"], "cuda", {RUNNER: "0"})
    assert asked.model_runner == "v1" and asked.text.endswith("model runner V1")
    why = judge_runner(asked, read_startup(logs["default"], "default.log"))
    assert why is not None and why.startswith("asked model runner V1, ran V2: log shows 'Using V2 Model Runner'")
    assert judge_runner(asked, read_startup(logs["v1"], "v1.log")) is None
    assert judge_runner(asked_of(["--enforce-eager"], "cuda", {}), read_startup(logs["v2"], "v2.log")) is None


def _document(name: str = "tiny-gpu-1a1f") -> dict:
    return yaml.safe_load((REPO / "python" / "afd_e2e" / "profiles" / f"{name}.yaml").read_text(encoding="utf-8"))


def _plan(document: dict):
    profile = parse_profile(document, "test.yaml")
    return build_plan(profile, model_path="/m", devices=tuple(range(profile.device_count)))


def test_every_child_native_included_starts_with_the_profiles_runner():
    plan = _plan(_document())
    processes = [p for case in plan.cases for p in case.processes]
    assert {p.role for p in processes} >= {"native", "attention", "ffn"}
    assert {p.env_set.get(RUNNER) for p in processes} == {"0"}  # V1 by default, on both sides of "native vs AFD"

    document = _document()
    document["engine"]["model_runner"] = "v2"
    assert {p.env_set.get(RUNNER) for case in _plan(document).cases for p in case.processes} == {"1"}

    document["engine"]["model_runner"] = "auto"  # vLLM's own choice: set nothing, and do not inherit the agent's
    auto = [p for case in _plan(document).cases for p in case.processes]
    assert all(RUNNER not in p.env_set and RUNNER in p.env_unset for p in auto)


def test_a_case_may_declare_its_own_runner_and_its_label_says_so():
    document = _document()
    case_id = next(iter(document["cases"]))
    document["cases"][case_id]["model_runner"] = "v2"
    plan = _plan(document)
    declared = plan.case(case_id)
    assert {p.env_set[RUNNER] for p in declared.processes} == {"1"} and "model runner V2" in declared.label
    others = [p for case in plan.cases if case.id != case_id for p in case.processes]
    assert {p.env_set[RUNNER] for p in others} == {"0"}


@pytest.mark.parametrize(
    ("where", "key"),
    [
        (("engine", "env", "set"), "engine.env.set"),
        (("engine", "env", "strip"), "engine.env.strip"),
        (("case", "env"), ".env"),
        (("case", "remove_env"), ".remove_env"),
    ],
)
def test_the_runner_variable_by_hand_is_refused_with_the_key(where, key):
    document = copy.deepcopy(_document())
    case_id = next(iter(document["cases"]))
    if where[0] == "engine":
        env = document["engine"].setdefault("env", {})
        env[where[2]] = {RUNNER: "1"} if where[2] == "set" else [RUNNER]
    else:
        document["cases"][case_id][where[1]] = {RUNNER: "1"} if where[1] == "env" else [RUNNER]
    with pytest.raises(UsageError) as caught:
        parse_profile(document, "test.yaml")
    assert key in caught.value.problem and "engine.model_runner" in caught.value.fix


def test_an_unknown_runner_is_refused_with_the_choices():
    document = _document()
    document["engine"]["model_runner"] = "v3"
    with pytest.raises(UsageError) as caught:
        parse_profile(document, "test.yaml")
    assert "engine.model_runner" in caught.value.problem and "v1, v2, auto" in caught.value.fix


def _side(asked: str | None, shown: str | None) -> CaseExecution:
    role = RoleExecution(
        "native",
        "server",
        ExecutionAsked("eager", "eager", model_runner=asked),
        Proof.PROVEN,
        "log shows 'Enforce eager set'",
        startup=StartupEvidence(log="server.log", model_runner=shown),
    )
    return CaseExecution(Status.PASSED, False, [role])


def test_sides_that_ran_the_same_runner_match():
    match = match_runners(_side("v1", "v1"), _side("v1", "v1"))
    assert match is not None and match.status is Status.PASSED and match.text == "both sides ran model runner V1"


def test_sides_that_ran_different_runners_undeclared_fail_with_the_fix():
    # the 12-05 run: vLLM chose V2 for the native baseline, the AFD candidate asked V1
    match = match_runners(_side(None, "v2"), _side("v1", "v1"))
    assert match is not None and match.status is Status.FAILED and not match.declared
    assert match.text.startswith("model runners differ: baseline V2, candidate V1; fix: set engine.model_runner")


def test_runners_the_cases_declare_are_a_declared_difference():
    match = match_runners(_side("v1", "v1"), _side("v2", "v2"))
    assert match is not None and match.status is Status.PASSED and match.declared
    assert match.text == "model runners differ as the cases declare: baseline V1, candidate V2"
    # declared, but one side did not run what it declared: not the difference the profile asked for
    assert match_runners(_side("v1", "v1"), _side("v2", "v1")).status is Status.PASSED  # the same runner after all
    assert match_runners(_side("v1", "v2"), _side("v2", "v1")).status is Status.FAILED


def test_a_side_whose_log_names_no_runner_is_a_warning_and_a_side_never_ready_is_nothing():
    match = match_runners(_side("v1", None), _side("v1", "v1"))
    assert match is not None and match.status is Status.WARNED and "not shown" in match.text
    assert match_runners(None, _side("v1", "v1")) is None


def test_different_runners_fail_the_verdict_and_the_comparisons_junit_testcase():
    results = typed(load_fixture("seed"))
    (cmp,) = [c for c in results.plan.comparisons if c.id == "performance"]
    results = dataclasses.replace(results, plan=dataclasses.replace(results.plan, comparisons=(cmp,)))
    results.comparisons = {cmp.id: results.comparisons[cmp.id]}
    results.case(cmp.baseline).set_section("execution", _side(None, "v2"))
    results.case(cmp.candidate).set_section("execution", _side("v1", "v1"))
    match_model_runners(results)
    verdict = decide_verdict(results)
    assert verdict.status is Status.FAILED
    assert any(r.startswith("performance model runners: failed: model runners differ") for r in verdict.reasons)
    testcase = next(t for t in build_testcases(results) if t.name == "model runners")
    assert testcase.outcome == "failure" and "baseline V2, candidate V1" in testcase.message
