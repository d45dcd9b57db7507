"""Unit tier: saturation named (issue 44 part 2). Each repetition's asked and achieved request rate, its peak
concurrency against the client's cap, and the rule that marks it saturated (``workloads.bench.load_of``), judged on
real ``vllm bench serve`` result JSON; then how a saturated side shows in the comparison, the annotation and JUnit,
and that results written before the ``load`` record still load and render without a word of it.

No real repetition in the fixtures was driven beyond capacity (every one reached 100-114% of the rate an
unsaturated server shows), so the saturated cases take a real JSON and change only its ``request_rate``: the rule
reads the asked rate, the achieved rate, the p99 end-to-end latency, the cap and the peak, and every one of those
but the asked rate stays as vLLM wrote it.
"""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from afd_e2e.profile.bench_spec import DEFAULT_BENCH_METRICS, MetricGate
from afd_e2e.report.annotation import render_annotation
from afd_e2e.report.capacity_report import capacity_section, case_testcase
from afd_e2e.report.junit import write_junit
from afd_e2e.results.model import RunResults
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.results.status import Saturation, Status
from afd_e2e.workloads import bench
from afd_e2e.workloads.performance_comparison import compare_case_performance
from repo_paths import FIXTURES
from results_docs import load_fixture, typed

CPU = FIXTURES / "vllm_bench" / "passed.json"  # CPU vLLM: 16 prompts at 8 req/s, max_concurrency 4, peak 8
GPU_LEVELS = sorted((FIXTURES / "results" / "tiny-gpu-capacity-1gpu" / "capacity" / "native-dp1").glob("*.json"))
GPU_22 = FIXTURES / "results" / "tiny-gpu-capacity-1gpu" / "capacity" / "native-dp1" / "level-22-rep-1.json"


def _real(path: Path, **changes: Any) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {**data, **changes}


@pytest.mark.parametrize("path", [CPU, *GPU_LEVELS], ids=lambda p: p.name)
def test_a_real_repetition_below_capacity_is_not_saturated(path: Path) -> None:
    data = _real(path)
    load = bench.load_of(data)
    assert load is not None and load.saturated is None
    assert load.requested_rate == data["request_rate"] and load.achieved_rate == data["request_throughput"]
    assert load.max_concurrency == data["max_concurrency"] and load.peak_concurrency == data["max_concurrent_requests"]
    assert load.drain_s == pytest.approx(data["p99_e2el_ms"] / 1000)
    prompts = data["num_prompts"]
    assert load.expected_rate == pytest.approx(prompts / (prompts / data["request_rate"] + load.drain_s))
    assert load.floor_rate == pytest.approx(0.9 * load.expected_rate)
    assert load.achieved_rate >= load.floor_rate


def test_the_drain_explains_a_short_runs_shortfall() -> None:
    """vLLM rescales its Poisson gaps so the last request leaves at num_prompts / rate: a real CPU repetition's
    duration is that plus about its last request's latency, not 1/sqrt(N) noise (16 prompts: 25%)."""
    data = _real(CPU)
    sent = data["num_prompts"] / data["request_rate"]
    assert sent < data["duration"] <= sent + data["p99_e2el_ms"] / 1000
    assert data["request_throughput"] < data["request_rate"]  # 7.77 of 8 asked, yet not saturated
    load = bench.load_of(data)
    assert load is not None and load.saturated is None


def test_beyond_capacity_with_the_cap_reached_is_concurrency_bound() -> None:
    """The real CPU repetition (peak 8 against max_concurrency 4) with only request_rate raised from 8 to 32."""
    load = bench.load_of(_real(CPU, request_rate=32.0))
    assert load is not None and load.saturated is Saturation.CONCURRENCY_BOUND
    assert load.floor_rate is not None and load.achieved_rate < load.floor_rate
    assert bench.load_text(load).startswith("SATURATED (concurrency-bound): achieved 7.77 of 32 req/s asked")


def test_beyond_capacity_with_the_cap_never_reached_is_server_bound() -> None:
    """The real GPU level-22 repetition (peak 41 against max_concurrency 128, 21.40 req/s achieved) with only
    request_rate raised from 22 to 40."""
    load = bench.load_of(_real(GPU_22, request_rate=40.0))
    assert load is not None and load.saturated is Saturation.SERVER_BOUND
    assert load.peak_concurrency == 41 and load.max_concurrency == 128


def test_an_infinite_rate_is_never_saturated() -> None:
    """vLLM writes "inf" when every request is sent at once: no rate to fall short of; cap and peak still kept."""
    load = bench.load_of(_real(CPU, request_rate="inf"))
    assert load is not None and load.saturated is None and load.requested_rate is None
    assert (load.max_concurrency, load.peak_concurrency) == (4, 8)
    assert "inf req/s asked" in bench.load_text(load)


def test_a_run_with_nothing_completed_is_failed_not_saturated(tmp_path: Path) -> None:
    rep = bench.read_result(FIXTURES / "vllm_bench" / "all-failed.json", 8, [])
    assert rep.status is Status.FAILED and rep.load is not None
    assert rep.load.achieved_rate == 0.0 and rep.load.saturated is None


def test_the_reader_records_the_load(tmp_path: Path) -> None:
    path = tmp_path / "rep-1.json"
    path.write_text(json.dumps(_real(CPU, request_rate=32.0)), encoding="utf-8")
    rep = bench.read_result(path, 16, [m.key for m in DEFAULT_BENCH_METRICS])
    assert rep.status is Status.PASSED  # saturation warns, never fails
    assert rep.load is not None and rep.load.saturated is Saturation.CONCURRENCY_BOUND


def _saturated_tiny_cpu() -> RunResults:
    """The real tiny-cpu run with cpu-tp2's repetitions given the load of the real CPU JSON asked at 32 req/s, and
    its comparison judged again by the product's rule."""
    results = typed(copy.deepcopy(load_fixture("tiny-cpu")))
    side = results.cases["cpu-tp2"].section(PERFORMANCE)
    base = results.cases["cpu-tp1"].section(PERFORMANCE)
    assert side is not None and base is not None
    for rep in side.repetitions:
        rep.load = bench.load_of(_real(CPU, request_rate=32.0))
    comparison = results.comparisons["tp1-vs-tp2"]
    judged = compare_case_performance(
        "cpu-tp1",
        base,
        "cpu-tp2",
        side,
        threshold_pct=10.0,
        control=False,
        metrics=tuple(MetricGate(metric, "note") for metric in DEFAULT_BENCH_METRICS),
    )
    comparison.set_section(PERFORMANCE, judged)
    return results


def test_a_comparison_with_a_saturated_side_says_so() -> None:
    performance = _saturated_tiny_cpu().comparisons["tp1-vs-tp2"].section(PERFORMANCE)
    assert performance is not None and performance.status is Status.PASSED
    assert performance.saturated == [
        "cpu-tp2: saturated (concurrency-bound) in 2 of 2 repetitions (1, 2): achieved 7.77, 7.77 req/s of 32 asked, "
        "below the floor 25.16 (90% of what an unsaturated server shows): latencies measured in saturation, not at "
        "the asked rate"
    ]


def test_the_annotation_warns_of_saturation() -> None:
    annotation = render_annotation(_saturated_tiny_cpu())
    assert annotation.style == "warning"
    text = annotation.body.replace("\\", "")  # Markdown's escapes off
    assert "⚠️ Compared in saturation: cpu-tp2: saturated (concurrency-bound)" in text  # the performance section
    assert "16/16 requests completed each; 0 failed requests; ⚠️ saturated (concurrency-bound) in 2 of 2" in text


def test_junit_warns_and_never_fails_on_saturation(tmp_path: Path) -> None:
    paths = write_junit(_saturated_tiny_cpu(), tmp_path / "junit")
    cases = {(tc.get("classname"), tc.get("name")): tc for p in paths for tc in ET.parse(p).getroot().iter("testcase")}
    metric = next(tc for (suite, name), tc in cases.items() if suite.endswith("tp1-vs-tp2") and "mean_ttft" in name)
    assert metric.find("failure") is None and metric.find("error") is None
    assert "warning:" in metric.findtext("system-out") and "compared in saturation: cpu-tp2" in metric.findtext(
        "system-out"
    )
    runs = next(tc for (suite, name), tc in cases.items() if suite.endswith("cpu-tp2") and name == "performance runs")
    assert runs.find("failure") is None
    assert "SATURATED (concurrency-bound): achieved 7.77 of 32 req/s asked" in runs.findtext("system-out")


def test_results_without_the_load_record_still_load_and_render(tmp_path: Path) -> None:
    """tiny-cpu's results.json was written before saturation was named: no ``load``, no ``saturated``."""
    raw = load_fixture("tiny-cpu")
    assert "load" not in raw["cases"]["cpu-tp1"]["performance"]["repetitions"][0]
    results = typed(raw)
    assert all(rep.load is None for case in results.cases.values() for rep in case.section(PERFORMANCE).repetitions)
    assert results.comparisons["tp1-vs-tp2"].section(PERFORMANCE).saturated == []
    assert "saturat" not in render_annotation(results).body.lower()
    for path in write_junit(results, tmp_path / "junit"):
        assert "saturat" not in path.read_text(encoding="utf-8").lower()


def test_a_capacity_level_beyond_capacity_says_saturated() -> None:
    """The real GPU sweep: its levels as measured name no saturation; its level 22 with each repetition's load read
    from the real level-22 JSON asked at 40 req/s says server-bound, in the level table and the JUnit levels."""
    results = typed(load_fixture("tiny-gpu-capacity-1gpu"))
    section = results.cases["native-dp1"].section("capacity")
    assert "saturated" not in capacity_section(results, {}) and "saturated" not in case_testcase(section).stdout
    level = next(lv for lv in section.levels if lv.level == 22)
    for rep in level.repetitions:
        rep.load = bench.load_of(_real(GPU_22, request_rate=40.0))
    assert "21.49 (saturated: server-bound)" in capacity_section(results, {})
    assert "22 req/s: passed, attainment 90% (saturated: server-bound)" in case_testcase(section).stdout
