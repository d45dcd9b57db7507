"""Profiles: the shipped ones load as described; bad ones fail with one line naming file, key and fix."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from afd_e2e.errors import UsageError
from afd_e2e.plan import build_plan
from afd_e2e.profile import builtin_profiles, catalogue, load_profile, parse_profile
from afd_e2e.profile.bench_spec import bench_spec
from repo_paths import REPO


def seed_document() -> dict:
    path = Path(__file__).resolve().parents[3] / "python/afd_e2e/profiles/qwen3.5-122b-a10b.yaml"
    return yaml.safe_load(path.read_text())


def test_shipped_profiles_load():
    assert {"qwen3.5-122b-a10b", "tiny-cpu", "deepseek-v2-lite-2a2f"} <= set(builtin_profiles())
    for name in builtin_profiles():
        assert load_profile(name).name == name


def test_seed_profile_cases_and_workloads():
    p = load_profile("qwen3.5-122b-a10b")
    assert [c.id for c in p.cases] == [
        "baseline-eager",
        "afd-eager-4a4f",
        "native-eager-dp8",
        "native-dp8-serving",
        "afd-4a4f-serving",
    ]
    assert [c.label for c in p.cases] == [
        "native DP4/TP1/EP4",
        "AFD 4A4F",
        "native DP8/TP1/EP8",
        "native DP8/TP1/EP8",
        "AFD 4A4F",
    ]
    assert p.model.checkpoint.num_experts == 256 and p.model.checkpoint.num_experts_per_tok == 8
    gsm8k = p.workloads["gsm8k"]
    assert (gsm8k.questions, gsm8k.shots, gsm8k.min_correct, gsm8k.max_tokens) == (7, 8, 7, 512)
    b = bench_spec(p)
    assert (b.input_len, b.output_len, b.num_prompts, b.request_rate, b.max_concurrency) == (1024, 128, 1024, 5, 32)
    assert (b.temperature, b.warmups, b.repetitions, b.max_repetitions) == (0.0, 1, 3, 9)
    assert (b.alternation, b.block) == ("blocks", 3)
    perf = next(c for c in p.comparisons if "performance" in c.measures)
    assert (perf.baseline, perf.candidate) == ("native-eager-dp8", "afd-eager-4a4f")
    plan = build_plan(p, model_path="/m")
    (series,) = plan.series
    assert (series.candidate, series.alternation, series.lead, series.launches) == (
        "afd-eager-4a4f",
        "blocks",
        "afd-eager-4a4f",
        4,
    )


def test_seed_capacity_sweep_raises_the_serving_limits_around_5_req_s():
    p = load_profile("qwen3.5-122b-a10b")
    spec = p.workloads["capacity"]
    assert spec.variable == "request_rate" and spec.grid()[0] < bench_spec(p).request_rate < spec.grid()[-1]
    assert (spec.slo.ttft_ms, spec.slo.tpot_ms, spec.slo.attainment) == (2000.0, 100.0, 0.9)
    capacity = next(c for c in p.comparisons if "capacity" in c.measures)
    for case_id in (capacity.baseline, capacity.candidate):
        case = p.case(case_id)
        assert case.phases == ("smoke", "capacity") and case.extends in ("native-eager-dp8", "afd-eager-4a4f")
        (edit,) = case.edits
        assert set(edit.remove_args) == {"--max-num-seqs", "--max-num-batched-tokens"}
        assert "--max-num-seqs=32" in edit.add_args
    text = (REPO / "python/afd_e2e/profiles/qwen3.5-122b-a10b.yaml").read_text(encoding="utf-8")
    assert text.count("UNTESTED ON HARDWARE") >= 2


def test_tiny_cpu_is_labelled_smoke_and_has_no_devices():
    p = load_profile("tiny-cpu")
    assert p.smoke_only and p.platform == "cpu" and p.device_count == 0
    assert "SMOKE" in p.description and p.workloads["gsm8k"].accuracy_meaningful is False
    assert [c.label for c in p.cases] == ["native DP1/TP1", "native DP1/TP2"]


def test_deepseek_profile_is_a_different_topology():
    p = load_profile("deepseek-v2-lite-2a2f")
    assert p.device_count == 4 and p.case("afd-2a2f").label == "AFD 2A2F"


def _error(mutate) -> str:
    doc = copy.deepcopy(seed_document())
    mutate(doc)
    with pytest.raises(UsageError) as info:
        parse_profile(doc, "bad.yaml")
    message = str(info.value)
    assert "\n" not in message and message.startswith("bad.yaml: ") and "(fix: " in message
    return message


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d.update(colour="red"), "colour: unknown key"),
        (lambda d: d["engine"].update(port_bsae=1), "engine.port_bsae: unknown key"),
        (lambda d: d["hardware"].update(gpus="eight"), "hardware.gpus: must be an integer"),
        (lambda d: d["workloads"]["gsm8k"].update(questions=True), "workloads.gsm8k.questions: must be an integer"),
        (lambda d: d["cases"]["afd-eager-4a4f"]["ffn"].update(dp=5), "layout 4A5F breaks P2pNcclAFDConnector's"),
        (lambda d: d["cases"]["baseline-eager"]["topology"].update(dp=3), "group 'attention' has 4 devices"),
        (lambda d: d["cases"]["baseline-eager"]["topology"].update(devices="gpus"), "unknown device group 'gpus'"),
        (lambda d: d["comparisons"]["performance"].update(baseline="nope"), "unknown case 'nope'"),
        (lambda d: d["devices"]["groups"].update(ffn=[4, 9]), "does not fit 8 devices"),
        (lambda d: d["cases"]["afd-eager-4a4f"].update(kind="disaggregated"), "unknown case kind"),
        (lambda d: d["cases"]["native-eager-dp8"].update(phases=["speed"]), "unknown phase 'speed'"),
        (lambda d: d["workloads"]["gsm8k"].update(min_correct=9), "9 > questions 7"),
        (lambda d: d.update(schema=2), "unsupported profile schema 2"),
        (lambda d: d["devices"]["groups"].update(ffn=[2, 6]), "overlap"),
        (lambda d: d["workloads"]["parity"].update(mode="fuzzy"), "workloads.parity.mode: unknown parity mode"),
        (lambda d: d["workloads"]["parity"].update(top_logprobs=50), "above vLLM's default --max-logprobs 20"),
        (lambda d: d["workloads"]["parity"].update(min_identical_share=0.0), "min_identical_share: unknown key"),
        (lambda d: d["workloads"]["bench"].update(metrics={"ttft": {}}), "bench.metrics.ttft: unknown metric"),
        (
            lambda d: d["workloads"]["bench"].update(metrics={"mean_ttft_ms": {"on_worse": "panic"}}),
            "bench.metrics.mean_ttft_ms.on_worse: unknown action 'panic'",
        ),
        (lambda d: d["workloads"]["bench"].update(metrics={}), "workloads.bench.metrics: lists no metrics"),
        (lambda d: d["workloads"]["bench"].update(alternation="launches"), "bench.alternation: unknown alternation"),
        (
            lambda d: d["workloads"]["bench"].update(alternation="blocks", repetitions=5),
            "bench.alternation: blocks of 3 need room for two a side, but repetitions run 5 to 5 "
            "(fix: set repetitions to {min: 5, max: 8} or more)",
        ),
        (lambda d: d["workloads"]["bench"].update(block_size=0), "workloads.bench.block_size: must be >= 1, got 0"),
    ],
)
def test_bad_profiles_name_the_key_and_the_fix(mutate, expected):
    assert expected in _error(mutate)


def test_unknown_profile_lists_the_shipped_ones():
    with pytest.raises(UsageError, match=r"use one of: .*qwen3\.5-122b-a10b"):
        load_profile("qwen-typo")


def test_broken_yaml_is_one_line(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(UsageError, match=r"broken\.yaml:2:1: YAML syntax error: expected ',' or '\]'") as info:
        load_profile(str(bad))
    assert "\n" not in str(info.value)


def test_a_missing_profile_path_is_no_such_file_not_an_unknown_profile(tmp_path):
    with pytest.raises(UsageError, match=r"missing\.yml: no such file"):
        load_profile(str(tmp_path / "missing.yml"))
    with pytest.raises(UsageError, match="unknown profile 'nope'"):
        load_profile("nope")


def test_type_errors_read_as_english(tmp_path):
    doc = yaml.safe_load((Path(__file__).resolve().parents[3] / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text())
    doc["engine"]["port_base"] = "high"
    path = tmp_path / "typed.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(UsageError) as info:
        load_profile(str(path))
    assert info.value.fix == "set port_base to an integer" and " a an " not in str(info.value)


def test_cpu_profile_rejects_data_parallel():
    doc = yaml.safe_load((Path(__file__).resolve().parents[3] / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text())
    doc["cases"]["cpu-tp1"]["topology"]["dp"] = 2
    with pytest.raises(UsageError, match="DP and EP fail on vLLM's CPU backend"):
        parse_profile(doc, "tiny.yaml")


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["engine"].update(startup_timeout_s=3600),
            "bad.yaml: engine.startup_timeout_s: moved to budgets.startup_s "
            "(fix: replace it with `budgets: {startup_s: 3600}`)",
        ),
        (lambda d: d["engine"].update(teardown_grace_s=20), "engine.teardown_grace_s: moved to budgets.teardown_s"),
        (
            lambda d: d["workloads"]["bench"].update(timeout_s=1800),
            "workloads.bench.timeout_s: moved to budgets.bench_repetition_s",
        ),
        (lambda d: d["budgets"].update(smoke_s=0), "budgets.smoke_s: must be > 0 seconds, got 0"),
        (lambda d: d["budgets"].update(startup=60), "budgets.startup: unknown key"),
        (
            lambda d: d["budgets"].update(drain_s=d["budgets"]["teardown_s"]),
            "budgets.drain_s: must be whole seconds from 0 to below teardown_s",
        ),
        (lambda d: d["budgets"].update(drain_s=1.5), "budgets.drain_s: must be"),
    ],
)
def test_time_budgets_live_in_one_section_and_old_keys_say_where_they_went(mutate, expected):
    assert expected in _error(mutate)


def test_the_heartbeat_lost_budget_defaults_to_30_s_and_a_profile_may_shorten_it():
    doc = seed_document()
    del doc["budgets"]["heartbeat_lost_s"]
    assert parse_profile(doc, "seed.yaml").budgets.heartbeat_lost_s == 30.0
    assert load_profile("tiny-cpu-two-agents").budgets.heartbeat_lost_s == 10.0  # the CPU smoke profile's
    assert load_profile("tiny-cpu-two-agents").budgets.replaced(heartbeat_lost_s=20).heartbeat_lost_s == 20.0


@pytest.mark.parametrize("seconds", [0, -5])
def test_a_heartbeat_lost_budget_that_is_not_positive_is_refused_with_its_fix(seconds):
    assert _error(lambda d: d["budgets"].update(heartbeat_lost_s=seconds)) == (
        f"bad.yaml: budgets.heartbeat_lost_s: must be > 0 seconds, got {seconds} "
        "(fix: set heartbeat_lost_s to a positive number of seconds)"
    )


def test_every_shipped_profile_states_its_budgets_and_the_bench_uses_the_repetition_budget():
    """Every budget a profile's cases use is written in it; a phase none of its cases runs (one added since, such
    as warmup) may keep its default unstated, so adding a phase edits no shipped profile."""
    for name in builtin_profiles():
        profile = load_profile(name)
        shipped = Path(__file__).resolve().parents[3] / "python/afd_e2e/profiles" / f"{name}.yaml"
        document = yaml.safe_load(shipped.read_text())
        run = {phase for case in profile.cases for phase in case.phases}
        unused = {p.budget.key for p in catalogue.phases() if p.name not in run}
        assert set(document["budgets"]) <= set(profile.budgets.keys()), name
        optional = {"drain_s"}  # half of teardown_s unless stated
        assert set(profile.budgets.keys()) - set(document["budgets"]) - optional <= unused, name
        if bench_spec(profile) is not None:
            assert bench_spec(profile).timeout_s == profile.budgets.bench_repetition_s
    seed = load_profile("qwen3.5-122b-a10b")
    # start-up 3600 + smoke 600 + correctness 3600 + teardown 20; the performance case adds (1 warm-up + the range's
    # max 9) x 1800 + 600
    assert catalogue.case_budget_s(seed, ("smoke", "correctness")) == 7820
    assert catalogue.case_budget_s(seed, ("performance",)) == 3600 + 10 * 1800 + 600 + 20


def _renamed_case(doc: dict, old: str, new: str) -> None:
    doc["cases"] = {new if k == old else k: v for k, v in doc["cases"].items()}


@pytest.mark.parametrize(
    ("case_id", "suggested"),
    [("AFD_Eager_4A4F", "afd-eager-4a4f"), ("afd_eager", "afd-eager"), ("afd--eager", "afd-eager"), ("-x-", "x")],
)
def test_a_case_id_that_is_not_lower_kebab_case_is_refused_with_the_id_to_use(case_id, suggested):
    """The AFD plugin's invariant 001: case ids name steps, meta-data, files and trend history."""
    message = _error(lambda d: _renamed_case(d, "native-eager-dp8", case_id))
    assert message == (
        f"bad.yaml: cases.{case_id}: case id {case_id!r} is not lower-kebab-case (fix: rename it to {suggested})"
    )


def test_every_shipped_profile_names_its_cases_in_lower_kebab_case():
    for name in builtin_profiles():
        for case in load_profile(name).cases:
            assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", case.id), (name, case.id)


def test_gsm8k_min_correct_0_passes_anything_so_only_a_smoke_only_profile_may_say_it():
    assert _error(lambda d: d["workloads"]["gsm8k"].update(min_correct=0)) == (
        "bad.yaml: workloads.gsm8k.min_correct: 0 passes any answers, and the profile is not smoke_only "
        "(fix: set min_correct to the correct answers the model must reach, or mark the profile smoke_only: true)"
    )
    tiny = yaml.safe_load((REPO / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text())
    assert tiny["smoke_only"] is True and tiny["workloads"]["gsm8k"]["min_correct"] == 0
    assert parse_profile(tiny, "tiny-cpu.yaml").workloads["gsm8k"].min_correct == 0  # the smoke profile keeps its 0
    tiny["smoke_only"] = False
    with pytest.raises(UsageError, match=r"workloads\.gsm8k\.min_correct: 0 passes any answers"):
        parse_profile(tiny, "tiny-cpu.yaml")
