"""Unit tier: the ``soak`` phase (``afd_e2e/phases/soak.py``), one module and one line of ``phases/builtin.py``: its
profile keys and refusals, the drift verdict (``workloads/soak_drift.py``) and the leak verdict (``telemetry/soak_leaks.py``)
judged on recorded real runs (``tests/fixtures/soak/``: the CPU vLLM with the fault plugin's slowdown and leak; the
GPU capacity fixture's timeline for GPU memory), and what the reports show of it. The engine proof is
tests/engine/test_soak_cpu_vllm.py.
"""

from __future__ import annotations

import gzip
import json
import math

import pytest
import yaml

from afd_e2e.errors import UsageError
from afd_e2e.phases.soak import SoakSpec
from afd_e2e.profile import catalogue, load_profile, parse_profile
from afd_e2e.report.junit import build_testcases
from afd_e2e.report.soak_report import soak_annotation
from afd_e2e.results.codec import to_json
from afd_e2e.results.schema import schema_text
from afd_e2e.results.soak_records import GPU_MEMORY, RSS, CaseSoak
from afd_e2e.results.status import Status, Verdict
from afd_e2e.results.store import results_from_json
from afd_e2e.telemetry.sampler import read_telemetry
from afd_e2e.telemetry.soak_leaks import judge_leaks, leak_words, memory_series
from afd_e2e.workloads.soak_drift import RequestSample, judge_drift, request_samples, thirds
from repo_paths import REPO

FIXTURES = REPO / "tests/fixtures/soak"
TINY = (REPO / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text()
CPU = load_profile("tiny-cpu").workloads["soak"]
# The bounds the recordings are judged against: they were made at 8 req/s over 24 s with a milder slowdown (1 ms more
# per step each second from the first) than the engine tier's, which took TPOT +109%: they are judged at +100%.
DRIFT_PCT, LEAK_BOUND = 100.0, CPU.leak_mib_per_10min


def tiny_with(soak: dict | None, *, bench: bool = True) -> dict:
    document = yaml.safe_load(TINY)
    document["cases"]["cpu-tp1"]["phases"].append("soak")
    if soak is None:
        del document["workloads"]["soak"]
    else:
        document["workloads"]["soak"] = soak
    if not bench:
        document["workloads"].pop("bench")
        document["workloads"].pop("capacity")
        document["comparisons"]["tp1-vs-tp2"]["measures"] = ["parity"]
        for case in document["cases"].values():
            case["phases"] = [p for p in case["phases"] if p not in ("performance", "capacity")]
    return document


def detailed(name: str) -> dict:
    return json.loads(gzip.decompress((FIXTURES / name / "soak.json.gz").read_bytes()))


def timeline(name: str) -> list[dict]:
    return read_telemetry(FIXTURES / name / "telemetry.jsonl.gz").samples


def test_it_is_a_built_in_phase_with_its_budget_and_keys():
    assert "soak" in catalogue.phase_names()
    assert catalogue.phase("soak").budget.key == "soak_s"
    profile = parse_profile(tiny_with({"duration_s": 30}), "x.yaml")
    spec = profile.workloads["soak"]
    # unset: the bench's load, five windows a third, 10% drift, 256 MiB per 10 minutes
    assert spec == SoakSpec(30.0, 8.0, 4, 5, 10.0, 256.0)
    assert spec.num_prompts == 240 and profile.budgets.soak_s == 1800
    assert SoakSpec(600, 2.5, 8, 5, 10, 256).num_prompts == math.ceil(2.5 * 600)


@pytest.mark.parametrize(
    ("soak", "error"),
    [
        ({"duration_s": 0}, r"workloads\.soak\.duration_s: must be > 0"),
        ({"drift_pct": -5}, r"workloads\.soak\.drift_pct: must be > 0"),
        ({"windows": 1}, r"workloads\.soak\.windows: must be >= 2"),
        ({"duration": 30}, r"workloads\.soak\.duration: unknown key.*duration_s"),
    ],
)
def test_a_bad_key_is_one_line_naming_it(soak, error):
    with pytest.raises(UsageError, match=error):
        parse_profile(tiny_with(soak), "x.yaml")


def test_a_soak_needs_its_section_and_the_bench_it_borrows_lengths_from():
    with pytest.raises(UsageError, match=r"soak phase without workloads\.soak"):
        parse_profile(tiny_with(None), "x.yaml")
    with pytest.raises(UsageError, match=r"workloads\.soak: needs workloads\.bench"):
        parse_profile(tiny_with({"duration_s": 30}, bench=False), "x.yaml")


def test_a_steady_engine_does_not_drift():
    """The leak run's engine (its steps not slowed): TPOT and TTFT within +100%."""
    drift = judge_drift(request_samples(detailed("leak")), windows=CPU.windows, drift_pct=DRIFT_PCT)
    assert [(d.metric, d.passed) for d in drift] == [("TPOT", True), ("TTFT", True)], drift
    assert all(d.verdict is not Verdict.WORSE for d in drift)


def test_an_engine_slowing_over_time_drifts_worse_with_its_interval_above_zero():
    samples = request_samples(detailed("slow"))
    tpot, _ = judge_drift(samples, windows=CPU.windows, drift_pct=DRIFT_PCT)
    assert (tpot.verdict, tpot.passed) == (Verdict.WORSE, False)
    assert tpot.ci95_pct[0] > 0 and tpot.delta_pct > DRIFT_PCT
    assert tpot.reason.startswith(f"TPOT {sum(tpot.first_ms) / len(tpot.first_ms):.2f} ms -> ")
    assert f"bound +{DRIFT_PCT:g}%" in tpot.reason
    # a tenfold bound is not reached: the verdict is the bound's, not the data's alone
    (tpot_wide, _) = judge_drift(samples, windows=CPU.windows, drift_pct=10 * DRIFT_PCT)
    assert tpot_wide.passed


def test_windows_split_each_third_by_start_and_a_sparse_soak_cannot_pass():
    samples = [RequestSample(float(t), 10.0 + t, 1.0 + t) for t in range(13)]  # one request a second, 0..12 s
    first, last = thirds(samples, 2, "TPOT")
    assert (first, last) == ([1.5, 3.5], [9.5, 12.0])  # 8-10 s, and 10-12 s with the last start on its edge
    sparse = [RequestSample(0.0, 10.0, 1.0), RequestSample(12.0, 10.0, 1.0)]
    drift = judge_drift(sparse, windows=4, drift_pct=10)
    assert not any(d.passed for d in drift)
    assert "raise workloads.soak.request_rate or duration_s" in drift[0].reason


def test_a_result_without_per_request_lists_is_refused():
    with pytest.raises(UsageError, match=r"soak result has no start_times.*--save-detailed"):
        request_samples({"completed": 3})


def test_a_leaking_role_is_named_with_its_growth():
    series = memory_series(timeline("leak"), {"server": []}, "soak")
    assert list(series) == [("server", RSS)]  # no GPU on the CPU
    (leak,) = judge_leaks(series, LEAK_BOUND)
    assert not leak.passed and leak.growth_mib_per_10min > 2 * LEAK_BOUND
    assert leak.last_mib > leak.first_mib
    assert leak_words(leak).startswith(f"server RSS grew {leak.growth_mib_per_10min:g} MiB per 10 min (")


def test_a_steady_role_stays_within_the_bound():
    """The slowed run's engine leaks nothing: its RSS over the soak stays within the CPU bound."""
    (leak,) = judge_leaks(memory_series(timeline("slow"), {"server": []}, "soak"), LEAK_BOUND)
    assert leak.passed, leak


def test_gpu_memory_is_judged_per_role_from_its_devices():
    """A real GPU run's capacity sweep (tests/fixtures/results/tiny-gpu-capacity-1gpu, recorded before RSS was
    sampled): its GPU memory, judged over the sweep's ~300 s, is flat; a bound below what it moved fails it."""
    records = read_telemetry(
        REPO / "tests/fixtures/results/tiny-gpu-capacity-1gpu/telemetry/native-dp1.jsonl.gz"
    ).samples
    series = memory_series(records, {"server": [0]}, "capacity")
    assert list(series) == [("server", GPU_MEMORY)]
    (leak,) = judge_leaks(series, 256)
    assert leak.passed and abs(leak.growth_mib_per_10min) < 256
    assert not memory_series(records, {"server": [1]}, "capacity")  # not its device: nothing to judge
    assert not judge_leaks({("r", RSS): [(0.0, 1.0), (9.0, 2.0)]}, 256)  # two samples are no window


def test_its_section_is_in_results_json_the_schema_junit_and_the_annotation():
    document = json.loads((REPO / "tests/fixtures/results/tiny-cpu/results.json").read_text())
    series = memory_series(timeline("leak"), {"server": []}, "soak")
    section = CaseSoak(
        Status.FAILED,
        "leak: ...",
        duration_s=24,
        request_rate=8,
        windows=4,
        drift_pct=100,
        drift=judge_drift(request_samples(detailed("slow")), windows=4, drift_pct=100),
        leaks=judge_leaks(series, 4096),
    )
    document["cases"]["cpu-tp1"]["soak"] = to_json(section)
    results = results_from_json(document)
    assert results.cases["cpu-tp1"].section("soak") == section
    assert '"CaseSoak"' in schema_text()
    tests = {t.name: t for t in build_testcases(results) if t.name.startswith("soak")}
    assert set(tests) == {"soak drift TPOT", "soak drift TTFT", "soak leak server RSS"}
    assert tests["soak drift TPOT"].outcome == "failure" and tests["soak leak server RSS"].outcome == "failure"
    assert tests["soak leak server RSS"].message.startswith("server RSS: +")
    (part,) = soak_annotation(results, {})
    assert part.title == "Soak" and "| cpu-tp1 | ❌ | 24 s at 8 req/s |" in part.text
