"""render_all: every report file from results.json, also for partial runs, replacing an earlier render."""

from __future__ import annotations

from pathlib import Path

import pytest

from afd_e2e.errors import UsageError
from afd_e2e.phases import rendering
from afd_e2e.report import render_all
from afd_e2e.report.annotation import FULL_REPORT_FILE, MAX_BYTES
from afd_e2e.report.artifact_files import list_artifacts, matching_globs
from afd_e2e.report.section_renderers import SectionReport
from afd_e2e.results.model import RunResults
from junit_xsd import assert_valid_junit


def test_seed_folder_renders_every_report(seed_dir: Path) -> None:
    (seed_dir / "logs" / "afd-eager-4a4f").mkdir(parents=True)
    (seed_dir / "logs" / "afd-eager-4a4f" / "attention.log").write_text("INFO ready\n")
    paths = render_all(seed_dir)
    assert paths.annotation == seed_dir / "annotation.md" and paths.annotation_full is None
    assert paths.junit == (seed_dir / "junit" / "qwen3.5-122b-a10b-1.xml",)
    assert_valid_junit(paths.junit[0])
    assert paths.plots == (seed_dir / "plots" / "performance.png",)
    assert (paths.annotation_style, paths.profile, paths.verdict) == ("warning", "qwen3.5-122b-a10b", "passed")
    body = paths.annotation.read_text(encoding="utf-8")
    assert "| TTFT | 371.29 ± 13.39 ms | 404.24 ± 6.16 ms | +8.87% |" in body
    for link in (
        "results.json",
        "junit/qwen3.5-122b-a10b-1.xml",
        "plots/performance.png",
        "logs/afd-eager-4a4f/attention.log",
    ):
        assert f'<a href="artifact://{link}">' in body


@pytest.mark.parametrize("run_status", ["running", "cancelled", "crashed"])
def test_partial_results_render_and_say_so(run_status: str, seed_results: dict, results_dir) -> None:
    seed_results.update(status=run_status, finished_at=None, comparisons={})
    seed_results["verdict"] = {"status": "running", "reasons": []}
    seed_results["cases"] = {
        "baseline-eager": {
            "id": "baseline-eager",
            "label": "native DP4/TP1/EP4",
            "kind": "native",
            "smoke": {"status": "running", "prompt": "The capital of France is"},
        }
    }
    seed_results["environment"], seed_results["preflight"] = {}, None
    paths = render_all(results_dir(seed_results))
    headline = paths.annotation.read_text(encoding="utf-8").splitlines()[0]
    assert {"running": "incomplete", "cancelled": "cancelled", "crashed": "crashed"}[run_status] in headline
    assert "partial results" in headline
    assert paths.plots == () and len(paths.junit) == 1
    assert_valid_junit(paths.junit[0])


def test_over_size_annotation_writes_the_full_text_beside_it(tiny_results: dict, results_dir) -> None:
    questions = tiny_results["cases"]["cpu-tp1"]["gsm8k"]["questions"]
    original = list(questions)
    questions[:] = [{**questions[0], "index": i} for i in range(30000)]
    paths = render_all(results_dir(tiny_results))
    assert paths.annotation_full == paths.out_dir / FULL_REPORT_FILE
    assert paths.annotation.stat().st_size <= MAX_BYTES < paths.annotation_full.stat().st_size
    questions[:] = original
    again = render_all(results_dir(tiny_results))
    assert again.annotation_full is None and not (again.out_dir / FULL_REPORT_FILE).exists()


def test_rendering_again_removes_the_plots_of_an_earlier_render_that_are_gone(seed_dir: Path) -> None:
    plots = seed_dir / "plots"
    plots.mkdir()
    for gone in ("old-comparison.png", "capacity-old-comparison.png", "telemetry-old-case.png"):
        (plots / gone).write_bytes(b"\x89PNG")
    paths = render_all(seed_dir)
    assert sorted(plots.glob("*.png")) == list(paths.plots) == [plots / "performance.png"]


def test_a_registered_renderer_writes_its_plots_after_the_built_in_ones(seed_dir: Path) -> None:
    """The plots come from the renderers' table, in the order registered, each writer given the results folder and
    the plots folder; the annotation links them by the keys the writers return."""

    def echo_plots(results: RunResults, out_dir: Path, plots_dir: Path) -> dict[str, Path]:
        assert (out_dir / "results.json").is_file() and results.profile == "qwen3.5-122b-a10b"
        (plots_dir / "echo.png").write_bytes(b"\x89PNG")
        return {"echo": plots_dir / "echo.png"}

    with rendering.rendered(SectionReport("echo", plots=echo_plots)):
        paths = render_all(seed_dir)
    assert paths.plots == (seed_dir / "plots" / "performance.png", seed_dir / "plots" / "echo.png")


def test_missing_results_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"results\.json does not exist"):
        render_all(tmp_path)


def test_real_crashed_run_renders_without_plots(crashed_results: dict, results_dir) -> None:
    paths = render_all(results_dir(crashed_results))
    assert paths.plots == () and paths.annotation_style == "error"
    assert assert_valid_junit(paths.junit[0]).get("errors") == "3"  # two crashed cases and the verdict


def test_every_file_a_run_writes_is_uploaded(seed_dir: Path) -> None:
    written = ["run-record.json", "logs/a/server.log", "gsm8k/a.jsonl"]
    written += ["bench/a/warmup-1.json", "bench/a/warmup-1.log", "bench/a/rep-1.json", "bench/a/rep-1.log"]
    for name in written:
        (seed_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (seed_dir / name).write_text("x\n", encoding="utf-8")
    paths = render_all(seed_dir)
    uploaded = {
        str(p.relative_to(seed_dir)) for glob in matching_globs(seed_dir) for p in seed_dir.glob(glob) if p.is_file()
    }
    on_disk = {str(p.relative_to(seed_dir)) for p in seed_dir.rglob("*") if p.is_file()}
    assert on_disk == uploaded
    assert set(written) <= set(list_artifacts(seed_dir)) and paths.annotation.name in uploaded
