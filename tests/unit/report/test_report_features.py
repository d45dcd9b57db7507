"""Replay, serving checks and profiler traces in the report: a JUnit testcase each, a features table in the
annotation with trace links, and only the traces chosen under the upload cap among the artifacts."""

from __future__ import annotations

from pathlib import Path

from afd_e2e.report import render_all
from afd_e2e.report.artifact_files import matching_globs
from afd_e2e.report.junit import build_testcases
from afd_e2e.results import profiler_records, replay_records, serving_records
from afd_e2e.results.model import CheckRecord, RunResults
from afd_e2e.results.profiler_records import ProfilerResult, RoleTrace, TraceFile
from afd_e2e.results.serving_records import ServingResult
from afd_e2e.results.status import Status
from afd_e2e.results.store import ResultsStore
from results_docs import load_fixture, typed

FAILED, PASSED = Status.FAILED, Status.PASSED


def with_features(results: RunResults, out: Path) -> RunResults:
    case = next(iter(results.cases.values()))
    unknown = CheckRecord("unknown_model", FAILED, "model 'afd-e2e-no-such-model' answered HTTP 200")
    case.set_section(
        serving_records.SECTION,
        ServingResult(FAILED, f"unknown_model: {unknown.detail}", [CheckRecord("completion", PASSED, "ok"), unknown]),
    )
    traces = [
        TraceFile("attention", "profiles/c/attention/new.pt.trace.json", 10, uploaded=True),
        TraceFile("attention", "profiles/c/attention/old.pt.trace.json", 10),
    ]
    for trace in traces:
        (out / trace.path).parent.mkdir(parents=True, exist_ok=True)
        (out / trace.path).write_text("{}")
    roles = [RoleTrace("attention", PASSED, "2 trace file(s)"), RoleTrace("ffn", FAILED, "no trace from the ffn role")]
    case.set_section(profiler_records.SECTION, ProfilerResult(FAILED, "no trace from the ffn role", 1.0, roles, traces))
    return results


def test_features_render_as_testcases_links_and_capped_uploads(tiny_results: dict, tmp_path: Path) -> None:
    results = with_features(typed(tiny_results), tmp_path)
    ResultsStore(tmp_path, results)
    names = {item.name: item for item in build_testcases(results)}
    assert names["serving completion"].outcome is None and names["serving unknown_model"].outcome == "failure"
    assert names["profiler trace attention"].outcome is None
    assert "no trace from the ffn role" in names["profiler trace ffn"].message
    render_all(tmp_path)
    annotation = (tmp_path / "annotation.md").read_text()
    assert '<a href="artifact://profiles/c/attention/new.pt.trace.json">' in annotation
    assert "over the 1.0 MiB upload cap" in annotation and "answered HTTP 200" in annotation
    uploads = matching_globs(tmp_path)
    assert "profiles/c/attention/new.pt.trace.json" in uploads and not any("old" in u for u in uploads)


def test_a_real_cpu_run_with_replay_and_serving_renders_them(tmp_path: Path) -> None:
    results = typed(load_fixture("tiny-cpu-features"))
    assert results.comparisons["tp1-vs-tp2"].section(replay_records.SECTION).status is PASSED
    names = [item.name for item in build_testcases(results)]
    assert [n for n in names if n.startswith("serving ")] == [
        "serving completion",
        "serving usage",
        "serving unknown_model",
        "serving concurrent",
    ]
    assert names.count("replay") == 2 and names.count("replay parity") == 1
    ResultsStore(tmp_path, results)
    render_all(tmp_path)
    annotation = (tmp_path / "annotation.md").read_text()
    assert "requests 8/8 identical (logprobs, top-5)" in annotation.replace("\\", "") and "HTTP 404" in annotation
