"""Unit tier: proof that can be had, planned before the run. Under ``execution.require_proof`` a case that asks
for CUDA graphs and has no profiler phase (or one whose active window opens on the first request's prefill, as the
12-05 GPU run's ``wait: 0, warmup: 1, active: 1`` did) is refused by ``afd-e2e plan`` (exit 2, one line naming the
case and the fix) and failed by preflight; the default schedule plans; the phase's requests span the schedule;
a capture is quoted by its completion line."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from afd_e2e.cli import main
from afd_e2e.execution.asked import asked_of
from afd_e2e.execution.judge import judge_role
from afd_e2e.execution.provable import unprovable
from afd_e2e.execution.startup import read_startup
from afd_e2e.execution.trace import read_traces
from afd_e2e.phases.profiler import request_tokens
from afd_e2e.plan import build_plan
from afd_e2e.plan.model import RunPlan
from afd_e2e.preflight.proof import check_proof
from afd_e2e.profile.section_readers import parse_profile
from afd_e2e.results.codec import from_json
from afd_e2e.results.status import Proof, Status
from repo_paths import FIXTURES, REPO

GPU_RUN = REPO.parent / "shared" / "fixtures" / "gpu" / "runs-2026-12-05"


def _document(profiler: dict | None, *, require_proof: bool = True) -> dict:
    """tiny-gpu-1a1f with a native graph case (FULL_DECODE_ONLY at 64: only a trace proves replay) and an eager one."""
    path = REPO / "python" / "afd_e2e" / "profiles" / "tiny-gpu-1a1f.yaml"
    document = copy.deepcopy(yaml.safe_load(path.read_text(encoding="utf-8")))
    native = {"kind": "native", "topology": {"devices": "attention", "dp": 1, "tp": 1, "ep": True}}
    document["cases"] = {
        "native-eager": {**native, "phases": ["smoke"]},
        "native-graph": {**native, "phases": ["smoke"], "graph": {"capture_size": 64}},
    }
    if profiler is not None:
        document["cases"]["native-graph"]["phases"].append("profiler")
        document["cases"]["native-graph"]["profiler"] = profiler
    document["comparisons"] = {}
    document["execution"] = {"require_proof": require_proof}
    return document


def _plan_command(tmp_path, document: dict, capsys) -> tuple[int, str, str]:
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    code = main(["plan", "--profile", str(path), "--model", "/m", "--devices", "0,1"])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_graph_case_that_must_prove_itself_without_a_profiler_phase_is_refused_by_plan(tmp_path, capsys):
    code, out, err = _plan_command(tmp_path, _document(None), capsys)
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "case native-graph asks CUDA graphs (server)" in line and "runs no profiler phase" in line
    assert "add profiler to cases.native-graph.phases with profiler: {wait: 2, warmup: 1, active: 4}" in line
    assert "native-eager" not in line  # eager is proven by its start-up lines


def test_the_same_case_with_the_profiler_phase_at_the_defaults_plans(tmp_path, capsys):
    code, out, err = _plan_command(tmp_path, _document({}), capsys)
    assert code == 0 and err == "" and "native-graph" in out
    assert '"wait_iterations":2,"warmup_iterations":1,"active_iterations":4' in out


def test_a_schedule_whose_window_opens_on_the_prefill_is_refused_with_the_schedule_that_works(tmp_path, capsys):
    code, _, err = _plan_command(tmp_path, _document({"wait": 0, "warmup": 1, "active": 1}), capsys)
    assert code == 2
    assert "active window starts after 1 step(s), on the first request's prefill" in err
    assert "set cases.native-graph.profiler: {wait: 2, warmup: 1, active: 4}" in err


def test_without_require_proof_nothing_is_refused_and_preflight_skips_the_family(tmp_path, capsys):
    document = _document(None, require_proof=False)
    code, _, _ = _plan_command(tmp_path, document, capsys)
    assert code == 0
    profile = parse_profile(document, "p.yaml")
    assert unprovable(profile, build_plan(profile, model_path="/m", devices=(0, 1))) == []
    (check,) = check_proof(profile, build_plan(profile, model_path="/m", devices=(0, 1)))
    assert check.status is Status.SKIPPED


def test_preflight_fails_one_check_per_case_that_cannot_prove_itself_and_passes_the_fixed_profile():
    profile = parse_profile(_document(None), "p.yaml")
    (check,) = check_proof(profile, build_plan(profile, model_path="/m", devices=(0, 1)))
    assert (check.name, check.status) == ("execution proof native-graph", Status.FAILED)
    assert check.fix.startswith("add profiler to cases.native-graph.phases")
    fixed = parse_profile(_document({}), "p.yaml")
    (check,) = check_proof(fixed, build_plan(fixed, model_path="/m", devices=(0, 1)))
    assert check.status is Status.PASSED


@pytest.mark.parametrize(("schedule", "at_least"), [({}, 2 + 1 + 4), ({"wait": 5, "warmup": 5, "active": 10}, 20)])
def test_each_profiler_request_spans_the_whole_schedule_in_decode_steps(schedule, at_least):
    profile = parse_profile(_document(schedule), "p.yaml")
    spec = profile.case("native-graph").profiler
    # one prefill step, then decode steps: the schedule ends inside the first request, whichever step counts first
    assert request_tokens(spec) - 1 > at_least
    assert request_tokens(spec) >= 8


@pytest.mark.skipif(not GPU_RUN.is_dir(), reason="the 12-05 GPU run's files are in ../shared, not in this checkout")
def test_the_12_05_schedules_are_judged_as_their_traces_turned_out():
    """The run that showed it: ``wait 0, warmup 1, active 1`` left the graph case unproven (no decode step in its
    trace), ``wait 2, warmup 1, active 4`` proved it; the planning rule refuses the first and passes the second."""
    for name, refused in (("profiler-active1", True), ("profiler-active4", False)):
        results = json.loads((GPU_RUN / f"{name}.results.json").read_text(encoding="utf-8"))
        (role,) = results["cases"]["native-graph"]["execution"]["roles"]
        (flag,) = [a for a in results["plan"]["cases"][1]["processes"][0]["argv"] if a.startswith("--profiler-config")]
        config = json.loads(flag.split("=", 1)[1])
        schedule = {k: config[f"{k}_iterations"] for k in ("wait", "warmup", "active")}
        profile = parse_profile(_document(schedule), "p.yaml")
        problems = unprovable(profile, build_plan(profile, model_path="/m", devices=(0, 1)))
        assert bool(problems) is refused and (role["proof"] == "proven") is not refused, (name, role["reason"])


def test_a_capture_is_quoted_by_its_completion_line_not_the_progress_bar():
    log = FIXTURES / "execution" / "gpu" / "native-graph" / "server.log"
    startup = read_startup(log.read_text(encoding="utf-8"), "native-graph/server.log")
    assert any("Graph capturing finished in" in line for line in startup.lines)
    assert not any("Capturing CUDA graphs" in line for line in startup.lines)
    assert startup.capture_modes  # the bar is still read: it says which modes were captured


def test_the_default_schedule_traced_decode_steps_only_on_a_real_h200():
    """The 12-06 device run (``tests/fixtures/execution/gpu-default-schedule``): at the default schedule both traces
    hold four decode steps and no prefill step; the graph case replays a graph in each, the eager case none; both
    logs show the V1 runner their environment asked."""
    folder = FIXTURES / "execution" / "gpu-default-schedule"
    plan = from_json(RunPlan, json.loads((folder / "plan.json").read_text(encoding="utf-8")))
    for case_id, graphs in (("native-eager", 0), ("native-graph", 4)):
        (process,) = plan.case(case_id).processes
        asked = asked_of(process.argv, plan.platform, process.env_set)
        startup = read_startup((folder / case_id / "server.log").read_text(encoding="utf-8"), f"{case_id}/server.log")
        trace = f"{case_id}/server.trace.json.gz"
        runtime = read_traces([folder / trace], [trace])
        proof, reason, _ = judge_role(asked, startup, runtime)
        assert proof is Proof.PROVEN, reason
        assert (runtime.decode.steps, runtime.prefill.steps) == (4, 0)
        assert runtime.decode.graph_launches == graphs
        assert (asked.model_runner, startup.model_runner) == ("v1", "v1")
