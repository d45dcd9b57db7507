"""A real CPU run whose engine hung in its step (``tests/fixtures/results/tiny-cpu-stall``, made by ``afd-e2e run``
with the fault plugin's ``AFD_E2E_FAULT_HANG_AFTER_STEPS=3``): its telemetry summary, the timeline plot drawn from
its ``telemetry/<case>.jsonl.gz`` and the annotation's Telemetry table with the stall and the plot's link."""

from __future__ import annotations

import shutil
from pathlib import Path

from matplotlib.image import imread

from afd_e2e.report import render_all
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
