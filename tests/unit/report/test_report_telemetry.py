"""A real CPU run whose engine hung in its step (``tests/fixtures/results/tiny-cpu-stall``, made by ``afd-e2e run``
with the fault plugin's ``AFD_E2E_FAULT_HANG_AFTER_STEPS=3``): its telemetry summary, the timeline plot drawn from
its ``telemetry/<case>.jsonl.gz`` and the annotation's Telemetry table with the stall and the plot's link. The timeline
of the real 1x H200 capacity run (``tiny-gpu-capacity-1gpu``: smoke and capacity 3.6 s apart after a 92 s start-up)
is drawn legibly: its words apart, the in-flight line above the engine's, the start-up span named."""

from __future__ import annotations

import shutil
from pathlib import Path

from matplotlib.image import imread

from afd_e2e.report import render_all
from afd_e2e.report.telemetry_report import plot_timeline, startup_spans
from afd_e2e.results.model import TelemetrySummary
from afd_e2e.telemetry.sampler import read_telemetry
from results_docs import RESULTS_FIXTURES, load_fixture, typed

FIXTURE = RESULTS_FIXTURES / "tiny-cpu-stall"


def test_the_stalled_run_carries_its_telemetry_summary_and_the_stall():
    results = typed(load_fixture("tiny-cpu-stall"))
    case = results.cases["cpu-tp1"]
    summary = case.section("telemetry")
    assert isinstance(summary, TelemetrySummary)
    assert case.failure.startswith("engine stalled during smoke: 1 requests in flight, no token for 10 s")
    assert [stall.message for stall in summary.stalls] == [case.failure]
    assert summary.samples > 10 and summary.stall_s == 10.0
    # the sampler's cost is recorded (what it is worth is benchmarks/lifecycle.py's "the samplers' cost")
    assert isinstance(summary.sampler_cpu_s, float) and summary.sampler_cpu_s >= 0
    assert [role.role for role in summary.roles] == ["server"] and summary.roles[0].mean_gpu_util_pct is None
    timeline = read_telemetry(FIXTURE / summary.path)
    assert len(timeline.samples) == summary.samples
    assert [phase for _, phase in timeline.marks] == ["startup", "smoke"]
    assert [message for _, message in timeline.stalls] == [case.failure]


def test_the_report_draws_the_timeline_and_links_it_from_the_telemetry_table(tmp_path: Path):
    shutil.copy(FIXTURE / "results.json", tmp_path / "results.json")
    shutil.copytree(FIXTURE / "telemetry", tmp_path / "telemetry")
    paths = render_all(tmp_path)
    png = tmp_path / "plots" / "telemetry-cpu-tp1.png"
    assert png in paths.plots
    height, width, _ = imread(png).shape
    assert width == 1100 and height > 400  # per role: requests, token rates, KV usage (no GPU rows on the CPU)
    annotation = paths.annotation.read_text(encoding="utf-8")
    assert "### Telemetry" in annotation
    assert "[timeline](artifact://plots/telemetry-cpu-tp1.png)" in annotation
    assert "engine stalled during smoke" in annotation


def test_a_case_without_its_telemetry_file_renders_without_a_plot(tmp_path: Path):
    shutil.copy(FIXTURE / "results.json", tmp_path / "results.json")
    paths = render_all(tmp_path)
    assert not (tmp_path / "plots" / "telemetry-cpu-tp1.png").exists()
    assert "| cpu\\-tp1 | server | — | " in paths.annotation.read_text(encoding="utf-8")


GPU_TIMELINE = RESULTS_FIXTURES / "tiny-gpu-capacity-1gpu" / "telemetry" / "native-dp1.jsonl.gz"


def _drawn(path: Path):
    timeline = read_telemetry(path)
    figure = plot_timeline(timeline)
    figure.canvas.draw()
    return timeline, figure


def test_phase_words_never_print_over_each_other_or_over_the_data():
    """smoke (91.6 s) and capacity (95.2 s) printed over each other inside the top panel: each word now sits above
    it, at its line, on the lowest row where it overlaps no other word."""
    timeline, figure = _drawn(GPU_TIMELINE)
    top = figure.axes[0]
    words = {text.get_text().strip(): text for text in top.texts}
    assert {"smoke", "capacity"} <= set(words)
    renderer = figure.canvas.get_renderer()
    extents = [text.get_window_extent(renderer) for text in words.values()]
    assert not [(a, b) for i, a in enumerate(extents) for b in extents[i + 1 :] if a.overlaps(b)]
    panel = top.get_window_extent(renderer)
    assert all(extent.y0 >= panel.y1 for extent in extents)  # above the data, never on it
    marks = dict((phase, at) for at, phase in timeline.marks)
    assert (
        words["smoke"].get_position()[0] == marks["smoke"] and words["capacity"].get_position()[0] == marks["capacity"]
    )


def test_the_in_flight_line_is_drawn_above_the_engines_running_line():
    """Where the client's requests in flight equal the engine's running ones, in flight hid under running: it is
    now drawn above it, dashed, so both show."""
    _timeline, figure = _drawn(GPU_TIMELINE)
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    in_flight, running = lines["in flight (client side)"], lines["running"]
    assert in_flight.get_zorder() > running.get_zorder() and in_flight.get_linestyle() == "--"


def test_start_up_is_shaded_and_named_so_a_compiling_silence_reads_as_start_up():
    """A compiling engine's 92 s of silence under a ``stall_s = 30`` title read as a missed stall: the start-up span
    (its mark to the first phase's) is shaded in every panel and named, and the title says how start-up is judged."""
    timeline, figure = _drawn(GPU_TIMELINE)
    marks = dict((phase, at) for at, phase in timeline.marks)
    assert startup_spans(timeline) == [(marks["startup"], marks["smoke"])]
    for ax in figure.axes:
        (shade,) = ax.patches
        xs = shade.get_patch_transform().transform(shade.get_path().vertices)[:, 0]
        assert (xs.min(), xs.max()) == (marks["startup"], marks["smoke"])
    assert any(text.get_text().strip().startswith("start-up (loading, compiling)") for text in figure.axes[0].texts)
    assert "in start-up: no log line and no CPU" in figure.get_suptitle()
