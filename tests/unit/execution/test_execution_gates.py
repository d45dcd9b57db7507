"""Unit tier: what the execution verdicts do beyond their section: a performance comparison whose sides did not
run the modes it says it compares fails before any number is judged; the per-case table's Mode cell, the
Execution mode section and a JUnit testcase per role; ``execution.require_proof`` and its default; a native case's
profiler is vLLM's own, its folder in argv."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
import yaml

from afd_e2e.errors import UsageError
from afd_e2e.execution.judge import judge_case
from afd_e2e.plan import build_plan
from afd_e2e.plan.model import RunPlan
from afd_e2e.plan.serve_argv import OUT_DIR
from afd_e2e.profile import load_profile
from afd_e2e.profile.section_readers import parse_profile
from afd_e2e.report.annotation import render_annotation
from afd_e2e.report.junit import build_testcases
from afd_e2e.results.codec import from_json
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.results.status import Proof, Status
from afd_e2e.workloads.comparisons import run_comparisons
from repo_paths import FIXTURES, REPO
from results_docs import RESULTS_FIXTURES, load_fixture, typed

CPU = FIXTURES / "execution" / "cpu"
SEED_DIR = RESULTS_FIXTURES / "seed"


def _section(case_id: str):
    plan = from_json(RunPlan, json.loads((CPU / "plan.json").read_text(encoding="utf-8")))
    case = next(c for c in plan.cases if c.id == case_id)
    return judge_case(case, plan.platform, CPU, {"server": f"{case_id}/server.log"}, False)


def _seed_with(baseline: str, candidate: str, comparison_id: str = "performance"):
    """The seed's real results with each side's execution section taken from a real CPU start-up."""
    results = typed(load_fixture("seed"))
    (cmp,) = [c for c in results.plan.comparisons if c.id == "performance"]
    plan = dataclasses.replace(results.plan, comparisons=(dataclasses.replace(cmp, id=comparison_id),))
    results = dataclasses.replace(results, plan=plan)
    results.case(cmp.baseline).set_section("execution", _section(baseline))
    results.case(cmp.candidate).set_section("execution", _section(candidate))
    return results, cmp


def test_sides_that_ran_the_modes_the_comparison_says_are_judged():
    results, _ = _seed_with("cpu-eager", "cpu-compiled", "eager-vs-compiled")
    performance = run_comparisons(load_profile("qwen3.5-122b-a10b"), results, SEED_DIR)["eager-vs-compiled"].section(
        PERFORMANCE
    )
    assert performance.metrics and performance.status is not Status.FAILED, performance.failure


def test_both_sides_eager_fail_an_eager_vs_graph_comparison_before_any_number():
    results, cmp = _seed_with("cpu-eager", "cpu-eager", "eager-vs-graph")
    performance = run_comparisons(load_profile("qwen3.5-122b-a10b"), results, SEED_DIR)["eager-vs-graph"].section(
        PERFORMANCE
    )
    assert performance.status is Status.FAILED and not performance.metrics
    assert performance.failure == (
        f"execution modes: candidate {cmp.candidate}'s server role asked eager, the comparison says cuda graphs"
    )


def test_a_contradicted_side_fails_the_comparison_with_its_evidence():
    results, cmp = _seed_with("cpu-eager", "cpu-forced-eager")
    performance = run_comparisons(load_profile("qwen3.5-122b-a10b"), results, SEED_DIR)["performance"].section(
        PERFORMANCE
    )
    assert performance.status is Status.FAILED and not performance.metrics
    assert performance.failure.startswith(
        f"execution modes: candidate {cmp.candidate}'s server role did not run compiled"
    )
    assert "Enforce eager set" in performance.failure


def test_the_reports_show_the_mode_per_case_and_a_testcase_per_role():
    results, cmp = _seed_with("cpu-eager", "cpu-forced-eager")
    annotation = render_annotation(results).body
    header = next(line for line in annotation.splitlines() if line.startswith("| Case | Status"))
    assert header.endswith("| Mode |")
    assert (
        '<span title="server: proven, log shows' in annotation
        and "✅ eager proven, model runner V1</span>" in annotation
    )
    assert "❌ compiled contradicted, model runner V1</span>" in annotation and "### Execution mode" in annotation
    cases = {(t.suite, t.name): t for t in build_testcases(results)}
    forced = cases[(f"afd-e2e.{results.profile}.case.{cmp.candidate}", "execution mode server")]
    assert forced.outcome == "failure" and forced.message.startswith(
        "asked compiled, no CUDA graphs (CPU), model runner V1: contradicted"
    )
    eager = cases[(f"afd-e2e.{results.profile}.case.{cmp.baseline}", "execution mode server")]
    assert eager.outcome is None and "Enforce eager set" in eager.stdout


def test_an_unproven_role_is_a_warned_testcase_unless_proof_is_required():
    results, cmp = _seed_with("cpu-eager", "cpu-eager")
    section = results.case(cmp.candidate).section("execution")
    section.roles[0].proof = Proof.UNPROVEN
    cases = {(t.suite, t.name): t for t in build_testcases(results)}
    warned = cases[(f"afd-e2e.{results.profile}.case.{cmp.candidate}", "execution mode server")]
    assert warned.outcome is None and warned.stdout.startswith("warning: asked eager")
    section.require_proof = True
    cases = {(t.suite, t.name): t for t in build_testcases(results)}
    assert cases[(f"afd-e2e.{results.profile}.case.{cmp.candidate}", "execution mode server")].outcome == "failure"


@pytest.mark.parametrize(
    ("profile", "required"),
    [("tiny-cpu", False), ("tiny-gpu-1a1f", False), ("tiny-gpu-features", True), ("deepseek-v2-lite-tp2", True)],
)
def test_proof_is_required_by_default_where_the_title_names_a_mode(profile, required):
    document = yaml_document(profile)
    stated = document.pop("execution", {}).get("require_proof")
    assert parse_profile(document, f"{profile}.yaml").require_proof is required
    # The feature profiles' graph cases run no profiler phase yet: they say require_proof: false until they do.
    assert load_profile(profile).require_proof is (required if stated is None else stated)


def test_require_proof_is_read_and_checked():
    document = yaml_document("tiny-cpu")
    document["execution"] = {"require_proof": True}
    assert parse_profile(document, "tiny-cpu.yaml").require_proof is True
    document["execution"] = {"require_proof": "yes"}
    with pytest.raises(UsageError, match=r"execution\.require_proof"):
        parse_profile(document, "tiny-cpu.yaml")


def yaml_document(name: str) -> dict:
    return copy.deepcopy(yaml.safe_load((REPO / "python/afd_e2e/profiles" / f"{name}.yaml").read_text("utf-8")))


def test_a_native_case_profiles_with_vllms_own_profiler_into_its_trace_folder():
    document = yaml_document("tiny-gpu-1a1f")
    document["cases"]["native-dp1"].update(profiler={"warmup": 0})
    document["cases"]["native-dp1"]["phases"].append("profiler")
    profile = parse_profile(document, "tiny-gpu-1a1f.yaml")
    (case,) = build_plan(profile, model_path="/m", case_ids=["native-dp1"], devices=(0, 1)).cases
    (flag,) = [a for a in case.processes[0].argv if a.startswith("--profiler-config=")]
    config = json.loads(flag.split("=", 1)[1])
    assert config["profiler"] == "torch" and config["torch_profiler_dir"] == f"{OUT_DIR}/traces/native-dp1/server"
    assert (config["wait_iterations"], config["warmup_iterations"], config["ignore_frontend"]) == (2, 0, True)
