"""Unit tier: load shapes as profile keys (``workloads.bench``'s ``burstiness``, ``ramp_up``, ``range_ratio``,
``dataset: prefix_repetition`` and named ``shapes``): read and refused by the profile reader in one line, each key
to ``vllm bench serve``'s own flag, the capacity sweep under a shape, preflight against the flags a real vLLM 0.32
defines (``fixtures/vllm_bench/bench-flags-0.32.0.json``, recorded by ``record_bench_flags.py``), and each shape
judged on its own repetitions with its verdict folded into the comparison's, naming the shape."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from afd_e2e.errors import UsageError
from afd_e2e.plan import build_plan
from afd_e2e.preflight.checks import FAIL, PASS, SKIP
from afd_e2e.preflight.software import BENCH_FLAGS, check_software
from afd_e2e.profile import catalogue, load_profile, parse_profile
from afd_e2e.profile.bench_spec import PrefixRepetition, RampUp, bench_spec
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.results.performance_records import PerformanceComparison
from afd_e2e.results.status import Status
from afd_e2e.workloads.bench import bench_argv, shape_argv, shape_flags, shape_words
from afd_e2e.workloads.capacity_sweep.sweep_phase import capacity_spec
from afd_e2e.workloads.comparisons import run_comparisons
from repo_paths import REPO
from results_docs import RESULTS_FIXTURES, load_fixture, typed
from unit.preflight.preflight_fixtures import installed_software

TINY = REPO / "python/afd_e2e/profiles/tiny-cpu.yaml"
RECORDED = json.loads((REPO / "tests/fixtures/vllm_bench/bench-flags-0.32.0.json").read_text(encoding="utf-8"))


def tiny(**bench) -> dict:
    """tiny-cpu's document with ``bench`` merged into ``workloads.bench`` (None drops a key)."""
    data = yaml.safe_load(TINY.read_text(encoding="utf-8"))
    data["workloads"]["bench"].update(bench)
    data["workloads"]["bench"] = {k: v for k, v in data["workloads"]["bench"].items() if v is not None}
    return data


def read(**bench):
    return parse_profile(tiny(**bench), "p.yaml")


def argv(spec) -> list[str]:
    return bench_argv(
        "vllm", spec, base_url="http://h", model="m", tokenizer="t", result_dir=Path("/r"), result_file="f"
    )


SHAPES = {
    "burst": {"burstiness": 0.25},
    "ramp": {"ramp_up": {"strategy": "linear", "start": 1, "end": 8}},
    "mixed": {"range_ratio": 0.5, "repetitions": 3},
    "shared-prefix": {"dataset": "prefix_repetition", "prefix_len": 32, "suffix_len": 16, "num_prefixes": 2},
}


def test_a_profile_without_shape_keys_runs_the_argv_it_always_ran():
    spec = bench_spec(load_profile("tiny-cpu"))
    assert (spec.burstiness, spec.ramp_up, spec.range_ratio, spec.prefix, spec.shapes) == (1.0, None, 0.0, None, ())
    assert shape_argv(spec) == [] and shape_flags(spec) == {}
    assert " ".join(argv(spec)) == (
        "vllm bench serve --backend vllm --base-url http://h --endpoint /v1/completions --model m --tokenizer t "
        "--dataset-name random --random-input-len 64 --random-output-len 16 --num-prompts 16 --request-rate 8 "
        "--max-concurrency 4 --seed 0 --temperature 0 --ignore-eos --percentile-metrics ttft,tpot,itl,e2el "
        "--metric-percentiles 50,90,99 --save-result --result-dir /r --result-filename f"
    )


def test_each_shape_is_the_base_with_its_overrides_and_each_key_its_vllm_flag():
    spec = bench_spec(read(shapes=SHAPES))
    assert [name for name, _ in spec.shapes] == list(SHAPES)
    burst, ramp, mixed, prefix = (spec.shape(name) for name in SHAPES)
    assert (burst.burstiness, burst.request_rate, burst.num_prompts, burst.shapes) == (0.25, 8.0, 16, ())
    assert (burst.warmups, burst.repetitions, burst.max_repetitions, mixed.repetitions) == (0, 2, 0, 3)
    assert shape_argv(burst) == ["--burstiness", "0.25"]
    assert ramp.ramp_up == RampUp("linear", 1, 8) and math.isinf(ramp.request_rate)
    assert shape_argv(ramp) == ["--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1", "--ramp-up-end-rps", "8"]
    assert argv(ramp)[argv(ramp).index("--request-rate") + 1] == "inf"  # vLLM refuses a ramp with a finite rate
    assert shape_argv(mixed) == ["--random-range-ratio", "0.5"]
    assert prefix.prefix == PrefixRepetition(32, 16, 2)
    assert shape_argv(prefix) == [
        "--prefix-repetition-prefix-len", "32", "--prefix-repetition-suffix-len", "16",
        "--prefix-repetition-num-prefixes", "2", "--prefix-repetition-output-len", "16",
    ]  # fmt: skip
    assert "--random-input-len" not in argv(prefix) and argv(prefix)[argv(prefix).index("--dataset-name") + 1] == (
        "prefix_repetition"
    )
    assert spec.shape("") is spec
    assert shape_flags(spec) == {
        "--burstiness": "workloads.bench.shapes.burst.burstiness",
        "--ramp-up-strategy": "workloads.bench.shapes.ramp.ramp_up",
        "--ramp-up-start-rps": "workloads.bench.shapes.ramp.ramp_up",
        "--ramp-up-end-rps": "workloads.bench.shapes.ramp.ramp_up",
        "--random-range-ratio": "workloads.bench.shapes.mixed.range_ratio",
        "--prefix-repetition-prefix-len": "workloads.bench.shapes.shared-prefix.dataset",
        "--prefix-repetition-suffix-len": "workloads.bench.shapes.shared-prefix.dataset",
        "--prefix-repetition-num-prefixes": "workloads.bench.shapes.shared-prefix.dataset",
        "--prefix-repetition-output-len": "workloads.bench.shapes.shared-prefix.dataset",
    }


def test_the_shape_keys_apply_to_workloads_bench_itself_and_its_ramp_replaces_request_rate():
    spec = bench_spec(read(burstiness=0.5, range_ratio=0.2))
    assert shape_argv(spec) == ["--burstiness", "0.5", "--random-range-ratio", "0.2"]
    data = tiny(request_rate=None, ramp_up={"strategy": "exponential", "start": 1, "end": 16})
    del data["workloads"]["capacity"]  # a ramp has no single load to sweep (refused below)
    for case in data["cases"].values():
        case["phases"].remove("capacity")
    data["comparisons"]["tp1-vs-tp2"]["measures"].remove("capacity")
    ramped = bench_spec(parse_profile(data, "p.yaml"))
    assert ramped.ramp_up == RampUp("exponential", 1, 16) and math.isinf(ramped.request_rate)
    assert shape_flags(ramped)["--ramp-up-strategy"] == "workloads.bench.ramp_up"


def test_a_shape_s_words_are_read_from_the_argv_that_ran():
    spec = bench_spec(read(shapes=SHAPES))
    assert shape_words(argv(spec.shape("burst"))) == "8 req/s, burstiness 0.25, at most 4 concurrent"
    assert shape_words(argv(spec.shape("ramp"))) == "linear ramp, from 1 req/s, to 8 req/s, at most 4 concurrent"
    assert shape_words(argv(spec.shape("shared-prefix"))) == (
        "8 req/s, 2 shared prefixes, of 32 tokens, + 16 own tokens, at most 4 concurrent"
    )


@pytest.mark.parametrize(
    ("bench", "words"),
    [
        ({"burstiness": 0}, "workloads.bench.burstiness: must be > 0, got 0"),
        ({"request_rate": math.inf, "burstiness": 0.5}, "but request_rate is inf"),
        ({"range_ratio": 1.0}, "workloads.bench.range_ratio: must be in [0, 1), got 1"),
        ({"prefix_len": 8}, "workloads.bench.prefix_len: belongs to dataset prefix_repetition"),
        ({"dataset": "prefix_repetition"}, "workloads.bench.prefix_len: missing"),
        (
            {"dataset": "prefix_repetition", "prefix_len": 8, "suffix_len": 8, "num_prefixes": 32},
            "32 prefixes for 16 prompts",
        ),
        ({"dataset": "sharegpt", "range_ratio": 0.5}, "mixes random lengths, but dataset is sharegpt"),
        ({"ramp_up": {"strategy": "linear", "start": 1, "end": 8}}, "set beside ramp_up, which sets the rate"),
        ({"request_rate": None, "ramp_up": {"strategy": "step", "start": 1, "end": 8}}, "unknown strategy 'step'"),
        ({"request_rate": None, "ramp_up": {"strategy": "linear", "start": 9, "end": 8}}, "9 req/s is above end 8"),
        ({"request_rate": None, "ramp_up": {"strategy": "exponential", "start": 0, "end": 8}}, "must be >= 1, got 0"),
        ({"request_rate": 0}, "workloads.bench.request_rate: must be > 0 or .inf, got 0"),
        ({"shapes": {"Burst": {"burstiness": 0.5}}}, "a shape's name must be lower-kebab-case"),
        ({"shapes": {"burst": {"burstines": 0.5}}}, "workloads.bench.shapes.burst.burstines: unknown key"),
        ({"shapes": {"burst": {"repetitions": {"min": 2, "max": 4}}}}, "shapes.burst.repetitions: must be an integer"),
        ({"shapes": {"p": {"dataset": "prefix_repetition"}}}, "workloads.bench.shapes.p.prefix_len: missing"),
        ({"shapes": {"p": {"range_ratio": 0.3, "dataset": "prefix_repetition"}}}, "dataset is prefix_repetition"),
    ],
)
def test_bad_shape_keys_are_one_line_errors_naming_the_key(bench, words):
    with pytest.raises(UsageError) as err:
        read(**bench)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_capacity_sweep_runs_under_a_named_shape_and_refuses_a_ramp():
    data = tiny(shapes=SHAPES)
    data["workloads"]["capacity"]["shape"] = "burst"
    profile = parse_profile(data, "p.yaml")
    assert capacity_spec(profile).shape == "burst"  # run_capacity sweeps bench.shape("burst")
    for shape, words in (("ramp", "a ramp sets its own rates"), ("nope", "no workloads.bench shape 'nope'")):
        data["workloads"]["capacity"]["shape"] = shape
        with pytest.raises(UsageError, match=words):
            parse_profile(data, "p.yaml")


def test_the_performance_budget_counts_every_shape_s_repetitions():
    plain, shaped = load_profile("tiny-cpu"), read(shapes=SHAPES)
    per = plain.budgets.bench_repetition_s
    budget = catalogue.phase("performance").budget
    added = budget.seconds(shaped) - budget.seconds(plain)
    assert added == per * (2 + 2 + 3 + 2)


def _preflight(profile, **installed):
    plan = build_plan(profile, model_path="/m", vllm_version="0.32.0")
    software = installed_software(
        vllm="0.32.0+cpu", torch="2.10.0+cpu", afd_plugin=None, nvidia_ml_py=None, **installed
    )
    checks = check_software(profile, plan, software)
    return [c for c in checks if c.name == BENCH_FLAGS]


def test_preflight_passes_shapes_the_real_vllm_0_32_client_has():
    assert set(shape_flags(bench_spec(read(shapes=SHAPES)))) <= set(RECORDED["bench_flags"])
    [check] = _preflight(read(shapes=SHAPES), bench_flags=tuple(RECORDED["bench_flags"]))
    assert check.status == PASS and check.measured == "vLLM 0.32.0+cpu's vllm bench serve has all 9"
    assert _preflight(load_profile("tiny-cpu"), bench_flags=()) == []  # no shape key: nothing to ask


def test_preflight_refuses_a_key_the_installed_client_lacks_in_one_line_naming_version_and_flag():
    """vLLM 0.32's recorded flags less the ramp's, as a client from before ``--ramp-up-strategy`` answers."""
    older = tuple(f for f in RECORDED["bench_flags"] if not f.startswith("--ramp-up"))
    [check] = _preflight(read(shapes=SHAPES), bench_flags=older)
    assert check.status == FAIL
    assert check.measured == (
        "vLLM 0.32.0+cpu's vllm bench serve has no --ramp-up-strategy (asked by workloads.bench.shapes.ramp.ramp_up); "
        "nor --ramp-up-start-rps, --ramp-up-end-rps"
    )
    assert check.fix == (
        "drop workloads.bench.shapes.ramp.ramp_up from the profile, or install a vLLM whose vllm bench serve has "
        "--ramp-up-strategy"
    )
    assert "\n" not in check.measured + check.fix
    [unread] = _preflight(read(shapes=SHAPES), bench_flags=None)
    assert unread.status == SKIP


SEED = typed(load_fixture("seed"))


def test_each_shape_is_judged_on_its_own_repetitions_and_a_failing_one_fails_the_comparison_naming_it():
    """The seed's real repetitions measured again as shape ``burst`` (the same numbers) and as ``worse`` (AFD's
    TTFT 30% slower): each shape gets its own metrics and verdicts, ``worse`` fails where TTFT is gated."""
    data = tiny(shapes={"burst": {"burstiness": 0.25}, "worse": {"burstiness": 0.5}})
    base = load_profile("qwen3.5-122b-a10b")
    profile = replace(
        base,
        workloads={
            **base.workloads,
            "bench": replace(bench_spec(base), shapes=bench_spec(parse_profile(data, "p.yaml")).shapes),
        },
    )
    gate = replace(bench_spec(base).metrics[2], on_worse="fail")  # mean TTFT
    shaped = replace(
        bench_spec(profile), shapes=tuple((n, replace(s, metrics=(gate,))) for n, s in bench_spec(profile).shapes)
    )
    profile = replace(profile, workloads={**profile.workloads, "bench": shaped})
    results = copy.deepcopy(SEED)
    for case in results.cases.values():
        if case.section(PERFORMANCE) is not None:
            case.section(PERFORMANCE).shapes = {"burst": copy.deepcopy(case.section(PERFORMANCE))}
            case.section(PERFORMANCE).shapes["worse"] = copy.deepcopy(case.section(PERFORMANCE))
    for rep in results.cases["afd-eager-4a4f"].section(PERFORMANCE).shapes["worse"].repetitions:
        rep.metrics["mean_ttft_ms"] *= 1.3
    performance: PerformanceComparison = run_comparisons(profile, results, RESULTS_FIXTURES / "seed")[
        "performance"
    ].section(PERFORMANCE)
    assert list(performance.shapes) == ["burst", "worse"]
    burst, worse = performance.shapes["burst"], performance.shapes["worse"]
    assert [m.key for m in burst.metrics] == ["mean_ttft_ms"] and burst.status is Status.PASSED
    assert worse.status is Status.FAILED and worse.failure.startswith("TTFT worse: +41")
    assert performance.status is Status.FAILED
    assert performance.failure.startswith("shape worse: TTFT worse: +41")
    assert [m.verdict for m in performance.metrics] != [] and performance.warnings  # the base's own, unchanged


def test_a_shape_a_side_never_measured_fails_the_comparison():
    data = tiny(shapes={"burst": {"burstiness": 0.25}})
    base = load_profile("qwen3.5-122b-a10b")
    profile = replace(
        base,
        workloads={
            **base.workloads,
            "bench": replace(bench_spec(base), shapes=bench_spec(parse_profile(data, "p.yaml")).shapes),
        },
    )
    performance = run_comparisons(profile, copy.deepcopy(SEED), RESULTS_FIXTURES / "seed")["performance"].section(
        PERFORMANCE
    )
    assert performance.shapes["burst"].status is Status.SKIPPED
    assert performance.status is Status.FAILED and "shape burst: " in performance.failure
