"""The phase registry: every part of every phase is there, and a phase registered from one module reaches the
profile, the results file and its schema with no other file edited."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from afd_e2e.errors import UsageError
from afd_e2e.phases import builtin, registry, rendering
from afd_e2e.phases.registry import Measure, Phase, ResultsSection
from afd_e2e.phases.rendering import rendered
from afd_e2e.profile import Profile, catalogue, load_profile, parse_profile
from afd_e2e.report import section_renderers
from afd_e2e.results import result_sections
from afd_e2e.results.codec import json_schema, to_json
from afd_e2e.results.execution_records import CaseExecution
from afd_e2e.results.model import CaseResults, Comparison, RunResults, TelemetrySummary
from afd_e2e.results.status import Status
from afd_e2e.results.store import results_from_json, results_to_json
from afd_e2e.runner import dispatch
from repo_paths import REPO
from throwaway_phase import ECHO, ECHO_REPORT, EchoResult, EchoSpec

CASE_FIELDS = {f.name for f in dataclasses.fields(CaseResults)}
PROFILE_FIELDS = {f.name for f in dataclasses.fields(Profile)}
# every section a registered reader reads: a phase may read another's (the replay phase sends correctness's parity
# prompts), which that phase's reader reads
READ_SECTIONS = {w.key for e in builtin.BUILTIN if isinstance(e, Phase) for w in e.workloads if w.read is not None}


@pytest.mark.parametrize("phase", [e for e in builtin.BUILTIN if isinstance(e, Phase)], ids=lambda p: p.name)
def test_every_phase_has_every_part(phase):
    assert phase.name and phase.doc
    assert phase.budget.key.endswith("_s") and phase.budget.default_s > 0
    for function in (phase.run, phase.needs):
        assert callable(function), function
    assert phase.sections, "a phase writes at least one results section"
    for section in phase.sections:
        assert section.name in CASE_FIELDS or section.type is not None, section
    for workload in phase.workloads:
        assert workload.key in PROFILE_FIELDS or workload.key in READ_SECTIONS, workload
    report = section_renderers.PHASES.get(phase.name)  # a phase with no renderer gets a testcase per section (warmup)
    assert report is not None or phase.name == "warmup"
    assert report is None or callable(report.junit)
    # the annotation shows it: parts of its own, or only columns of the per-case table (smoke)
    assert report is None or callable(report.annotation) or (report.annotation is None and report.columns)
    for column in report.columns if report else ():
        assert column.header and callable(column.cell)
    if phase.measure is not None:
        assert callable(phase.measure.compare) and callable(phase.measure.needs)
        assert callable(section_renderers.MEASURES[phase.measure.name])
        comparison_fields = {f.name for f in dataclasses.fields(Comparison)}
        assert phase.measure.section.name in comparison_fields or phase.measure.section.type is not None


def test_case_sections_that_are_no_phase_have_a_home_too():
    assert list(catalogue.SECTIONS) == ["hygiene", "forensics", "telemetry", "execution"]
    hygiene, forensics, telemetry, execution = section_renderers.CASE_SECTIONS.values()
    assert "hygiene" in CASE_FIELDS and callable(hygiene.junit) and callable(hygiene.annotation)
    assert "forensics" in CASE_FIELDS and callable(forensics.annotation)
    # telemetry: stored beside CaseResults' fields, with the budget its watchdog judges by
    assert callable(telemetry.annotation) and result_sections.extra_case_sections()["telemetry"] is TelemetrySummary
    assert (budget := catalogue.SECTIONS["telemetry"].budget) is not None and budget.key == "stall_s"
    # execution: stored beside them too, with a column of the per-case table and a testcase per role
    assert result_sections.extra_case_sections()["execution"] is CaseExecution
    assert [c.header for c in execution.columns] == ["Mode"] and callable(execution.junit)
    # stalls are judged in every phase but the profiler's (stop_profile holds its request while traces are written)
    assert dispatch.stall_watched_phases() == set(catalogue.phase_names()) - {"profiler"}


def test_the_profile_reads_phase_names_budgets_and_measures_from_the_catalogue():
    profile = load_profile("tiny-cpu")
    assert set(profile.budgets.phases) == {p.budget.key for p in catalogue.phases()} | {"stall_s"}
    assert list(catalogue.MEASURES) == ["parity", "replay", "performance", "capacity"]
    assert catalogue.phase_names() == (
        "smoke",
        "warmup",
        "correctness",
        "replay",
        "serving",
        "profiler",
        "performance",
        "capacity",
        "soak",
    )
    assert result_sections.written_sections() == (
        "smoke",
        "warmup",
        "gsm8k",
        "parity_records",
        "parity_outputs",
        "replay",
        "serving",
        "profiler",
        "performance",
        "capacity",
        "soak",
    )


@pytest.mark.parametrize(
    ("name", "refusal"),
    [
        ("smoke", "phases: 'smoke' is already registered"),
        ("hygiene", r"phases: 'hygiene' is already registered \(in case sections\)"),  # one namespace for both
    ],
)
def test_a_name_registered_twice_is_refused(name, refusal):
    with pytest.raises(ValueError, match=refusal), registry.registered(dataclasses.replace(ECHO, name=name)):
        pytest.fail("registered")


def test_a_refused_test_phase_leaves_no_table_holding_it():
    taken = dataclasses.replace(ECHO, measure=Measure("parity", ResultsSection("echo"), lambda *_: None))
    with pytest.raises(ValueError, match="measures: 'parity' is already registered"), registry.registered(taken):
        pytest.fail("registered")
    assert not any("echo" in table for table in registry.TABLES)


def test_installed_tables_are_frozen_and_a_second_install_changes_nothing():
    tables = (*registry.TABLES, section_renderers.PHASES, section_renderers.CASE_SECTIONS, section_renderers.MEASURES)
    before = [dict(table) for table in tables]
    builtin.install_phases()
    rendering.install_renderers()
    assert [dict(table) for table in tables] == before
    assert all(table.frozen for table in tables)
    with pytest.raises(RuntimeError, match="phases: cannot register 'echo', the table is frozen"):
        registry.register_phase(ECHO)
    assert "echo" not in catalogue.PHASES


def test_a_phase_registered_from_one_module_reaches_profile_results_and_schema():
    text = (REPO / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text()
    with_echo = text.replace(
        "phases: [smoke, correctness, performance, capacity]",
        "phases: [smoke, correctness, performance, capacity, echo]",
        1,
    )
    with pytest.raises(UsageError, match="unknown phase 'echo'"):
        parse_profile(yaml.safe_load(with_echo), "tiny-cpu.yaml")
    document = yaml.safe_load(with_echo.replace("request_s: 300", "request_s: 300\n  echo_s: 7"))
    document["workloads"]["echo"] = {"path": "/v1/models?x=1"}
    unregistered = yaml.safe_load(text)
    unregistered["workloads"]["echo"] = {"path": "/v1/models?x=1"}
    with pytest.raises(UsageError, match=r"workloads\.echo: unknown key"):
        parse_profile(unregistered, "x.yaml")
    with registry.registered(ECHO):
        profile = parse_profile(document, "x.yaml")
        assert profile.cases[0].phases[-1] == "echo" and profile.budgets.echo_s == 7
        assert profile.workloads["echo"] == EchoSpec("/v1/models?x=1")
        assert catalogue.case_budget_s(profile, ("echo",)) == profile.budgets.startup_s + 7 + profile.budgets.teardown_s
        case = CaseResults("cpu-tp1", "native", "native")
        case.set_section("echo", EchoResult(Status.PASSED, models=["tiny-moe"]))
        assert to_json(case)["echo"] == {"status": "passed", "failure": None, "models": ["tiny-moe"]}
        schema = json_schema(RunResults, schema_id="x", title="x")
        assert schema["$defs"]["CaseResults"]["properties"]["echo"] == {"$ref": "#/$defs/EchoResult"}
    assert "echo" not in catalogue.phase_names()
    assert "echo" not in json_schema(RunResults, schema_id="x", title="x")["$defs"]["CaseResults"]["properties"]


def test_a_registered_section_is_read_back_by_its_type_and_unknown_keys_still_refused(results_document):
    case_id = next(iter(results_document["cases"]))
    results_document["cases"][case_id]["echo"] = {"status": "passed", "models": ["tiny-moe"]}
    with pytest.raises(UsageError, match=rf"cases\.{case_id}\.echo: unknown field"):
        results_from_json(results_document)
    with registry.registered(ECHO):
        read = results_from_json(results_document)
        assert read.cases[case_id].section("echo") == EchoResult(Status.PASSED, models=["tiny-moe"])
        assert results_to_json(read)["cases"][case_id]["echo"]["models"] == ["tiny-moe"]


@pytest.fixture
def results_document():
    return json.loads((REPO / "tests/fixtures/results/tiny-cpu/results.json").read_text())


def test_a_registered_phase_renders_its_own_junit_testcase_and_annotation_section(results_document):
    from afd_e2e.report.annotation import render_annotation
    from afd_e2e.report.junit import build_testcases

    case_id = next(iter(results_document["cases"]))
    results_document["cases"][case_id]["echo"] = {"status": "failed", "failure": "tiny-moe not served"}
    with registry.registered(ECHO), rendered(ECHO_REPORT):
        results = results_from_json(results_document)
        echo = [t for t in build_testcases(results) if t.name == "echo models"]
        body = render_annotation(results).body
    assert [(t.suite, t.outcome, t.message) for t in echo] == [
        (f"afd-e2e.tiny-cpu.case.{case_id}", "failure", "tiny-moe not served")
    ]
    assert f"### Echo\n\n| Case | Served models |\n| --- | --- |\n| {case_id} |  |\n" in body
    assert body.index("### Echo") < body.index("### Hygiene")
