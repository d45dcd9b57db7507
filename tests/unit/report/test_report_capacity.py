"""A real CPU capacity run in the reports (``tests/fixtures/results/tiny-cpu-capacity``, kept from
``tests/engine/test_capacity_cpu_vllm.py``): the plot per comparison, the annotation's table, a JUnit testcase
per case and per comparison, the trend's capacity per case; and what a cut-short or worse sweep turns into. The
12-05 H200 run's sweeps (``../shared/fixtures/gpu/runs-2026-12-05``, issue 49), re-estimated, show their intervals."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.image import imread
from matplotlib.text import Text

from afd_e2e.report import render_all
from afd_e2e.report.capacity_report import (
    Side,
    at_capacity,
    capacity_section,
    case_testcase,
    plot_capacity,
    plot_groups,
)
from afd_e2e.report.junit import build_testcases
from afd_e2e.results.capacity_records import BRACKETED, CaseCapacity
from afd_e2e.results.codec import from_json
from afd_e2e.results.status import Status, Verdict
from afd_e2e.trend.record import case_values
from afd_e2e.workloads.capacity_sweep.level_search import SearchPlan, estimate
from afd_e2e.workloads.capacity_sweep.sweep import observation
from repo_paths import SHARED
from results_docs import RESULTS_FIXTURES, load_fixture, typed

FIXTURE = "tiny-cpu-capacity"
CASES = ("cpu-tp1", "cpu-tp2", "cpu-tp1-seqs1")


def test_the_real_run_renders_one_plot_per_comparison_with_the_sweep_in_the_annotation(tmp_path: Path) -> None:
    shutil.copy(RESULTS_FIXTURES / FIXTURE / "results.json", tmp_path / "results.json")
    paths = render_all(tmp_path)
    for comparison in ("tp1-vs-tp2", "serving-limit"):
        png = tmp_path / "plots" / f"capacity-{comparison}.png"
        assert png in paths.plots
        height, width, _ = imread(png).shape
        assert (width, height) == (1400, 950)  # four panels against the load: attainment, throughput, TTFT, TPOT
    annotation = paths.annotation.read_text(encoding="utf-8")
    assert "### Capacity at SLO" in annotation and "these numbers mean nothing" in annotation
    assert '<img src="artifact://plots/capacity-serving-limit.png"' in annotation
    for case_id in CASES:
        assert f"{case_id}: every level".replace("-", "\\-") in annotation  # Markdown-escaped


def test_each_case_and_comparison_is_a_junit_testcase() -> None:
    results = typed(load_fixture(FIXTURE))
    tests = {(t.suite.rsplit(".", 1)[-1], t.name): t for t in build_testcases(results)}
    for suite in (*CASES, "tp1-vs-tp2", "serving-limit"):
        assert (suite, "capacity at SLO") in tests, suite
    limit = tests[("serving-limit", "capacity at SLO")]
    assert limit.outcome == "failure" and "capacity at SLO worse" in limit.message  # on_worse: fail


def test_the_gate_verdicts_and_shared_levels_are_what_the_run_recorded() -> None:
    results = typed(load_fixture(FIXTURE))
    limit = results.comparisons["serving-limit"].section("capacity")
    assert limit.verdict is Verdict.WORSE and limit.status is Status.FAILED
    assert results.status is Status.FAILED and any("serving-limit" in r for r in results.verdict.reasons)
    tp1 = results.case("cpu-tp1").section("capacity")
    tp2 = results.case("cpu-tp2").section("capacity")
    far = min((lv.level for lv in tp2.levels if lv.far_miss), default=float("inf"))
    assert {lv.level for lv in tp1.levels if lv.level <= far} <= {lv.level for lv in tp2.levels}


def test_the_trend_follows_capacity_when_a_sweep_bracketed_it() -> None:
    results = typed(load_fixture(FIXTURE))
    for case_id in CASES:
        section = results.case(case_id).section("capacity")
        values = case_values(results.case(case_id))
        if section.estimate.outcome == BRACKETED:
            assert values["capacity_at_slo"] == section.estimate.capacity
        else:
            assert "capacity_at_slo" not in values  # a one-sided bound is not a value to trend


def test_a_cut_short_sweep_warns_in_junit_and_says_so_in_the_annotation() -> None:
    results = typed(load_fixture(FIXTURE))
    case = results.case("cpu-tp1")
    section = case.section("capacity")
    estimate = dataclasses.replace(section.estimate, cut_short=True, text=section.estimate.text + " (cut short)")
    case.set_section("capacity", dataclasses.replace(section, estimate=estimate))
    assert case_testcase(case.section("capacity")).status is Status.WARNED
    assert r"\(cut short\)" in capacity_section(results, {})  # Markdown-escaped
    assert set(plot_groups(results)) == {"tp1-vs-tp2", "serving-limit"}


def test_the_capacity_point_lies_on_the_drawn_segment_of_a_log_latency_axis() -> None:
    """The plot joins levels with straight segments on a log axis, so the marked point is interpolated in log space."""
    for case_id in CASES:
        section = typed(load_fixture(FIXTURE)).case(case_id).section("capacity")
        est = section.estimate
        if est.outcome != BRACKETED or est.passed_level == est.failed_level:
            continue
        by_level = {lv.level: lv.metrics for lv in section.levels}
        low, high = by_level[est.passed_level]["p99_tpot_ms"], by_level[est.failed_level]["p99_tpot_ms"]
        share = (est.capacity - est.passed_level) / (est.failed_level - est.passed_level)
        marked = at_capacity(section, "p99_tpot_ms", log_scale=True)
        assert math.isclose(math.log(marked), math.log(low) + share * (math.log(high) - math.log(low)))
        assert min(low, high) <= marked <= max(low, high)
        break
    else:
        raise AssertionError("the fixture has no bracketed case")


def _gpu_run_sides() -> list[Side]:
    """The 12-05 H200 run's two sweeps (native eager, native graph), re-estimated, labelled as the report does."""
    run = json.loads(
        (SHARED / "fixtures" / "gpu" / "runs-2026-12-05" / "capacity-eager-vs-graph.results.json").read_text("utf-8")
    )
    labels = {"native-eager": "native DP1/TP1", "native-graph": "native DP1/TP1, CUDA graph 64"}  # the run's
    sides = []
    for case_id, label in labels.items():
        section = from_json(CaseCapacity, run["cases"][case_id]["capacity"])
        plan = SearchPlan(grid=tuple(section.grid), target=section.slo.attainment, search=section.search)
        est = estimate(plan, {lv.level: observation(lv) for lv in section.levels}, unit=section.unit)
        sides.append(Side(case_id, f"{case_id} ({label})", dataclasses.replace(section, estimate=est)))
    return sides


def _gpu_run_figure() -> Figure:
    figure = plot_capacity("capacity: native DP1/TP1, CUDA graph 64 vs native DP1/TP1", _gpu_run_sides())
    figure.canvas.draw()
    return figure


def test_each_interval_is_drawn_on_the_target_line_and_said_whole_in_the_title() -> None:
    sides = _gpu_run_sides()
    figure = plot_capacity("capacity: native eager vs native graph", sides)
    drawn = [list(line.get_xdata()) for line in figure.axes[0].get_lines()]  # the attainment panel
    title = " ".join(figure.get_suptitle().split())  # wrapped to the figure's width
    for side in sides:
        est = side.capacity.estimate
        assert est.interval in drawn  # the bar on the attainment panel's target line
        assert f"{side.label}: {est.text}" in title  # whole, the interval's words included


def test_each_curve_reads_left_to_right_in_increasing_load() -> None:
    """The 12-05 graph case's throughput is not monotonic in load (77 req/s at 12, 72 at 20, 128 at 36): joined in
    load order against throughput, its latency lines zigzagged. Every curve is drawn against the load."""
    sides = _gpu_run_sides()
    curves = [line for ax in _gpu_run_figure().axes for line in ax.get_lines() if line.get_marker() == "o"]
    assert len(curves) >= 3 * len(sides)  # every panel draws every case's curve
    loads = {tuple(lv.level for lv in side.capacity.levels) for side in sides}
    for line in curves:
        xs = [float(x) for x in line.get_xdata()]
        assert xs == sorted(xs) and len(set(xs)) == len(xs), xs
        assert tuple(xs) in loads  # the x axis is the load, each level once


def test_the_legend_lies_within_the_figure() -> None:
    figure = _gpu_run_figure()
    legends = [*figure.legends, *(ax.get_legend() for ax in figure.axes if ax.get_legend() is not None)]
    assert legends
    box = figure.bbox
    for legend in legends:
        extent = legend.get_window_extent()
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1 and box.y0 <= extent.y0 and extent.y1 <= box.y1, extent


def test_no_text_in_the_picture_is_cut() -> None:
    """Labels in an image are whole (wrapped to fit); a cut marker belongs in text, where results.json is a click away."""
    texts = [text.get_text() for text in _gpu_run_figure().findobj(Text)]
    assert any("native-graph (native DP1/TP1, CUDA graph 64)" in " ".join(text.split()) for text in texts)
    assert not [text for text in texts if "characters cut" in text]
