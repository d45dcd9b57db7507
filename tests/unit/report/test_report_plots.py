"""Unit tier: plots: one valid PNG per comparison with metrics, of a sensible size, robust to odd labels and missing data,
each metric drawn as its verdict judged it (the interval against the margin)."""

from __future__ import annotations

import struct
from pathlib import Path

import matplotlib.image
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

from afd_e2e.report.performance_report import VERDICT_COLORS, plot_comparison, write_performance_plots
from afd_e2e.report.plots import DPI, remove_pngs, write_pngs
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.results.status import Verdict
from results_docs import typed

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    length, chunk = struct.unpack(">I4s", data[8:16])
    assert (length, chunk) == (13, b"IHDR")
    return struct.unpack(">II", data[16:24])


def test_seed_comparison_plot_is_a_valid_png_of_sensible_size(seed_results: dict, tmp_path: Path) -> None:
    plots = write_performance_plots(typed(seed_results), tmp_path / "plots")
    assert plots == {"performance": tmp_path / "plots" / "performance.png"}  # parity-only comparisons get none
    width, height = _png_size(plots["performance"])
    assert 800 <= width <= 3000 and 400 <= height <= 2000
    assert 20_000 <= plots["performance"].stat().st_size <= 2_000_000
    pixels = matplotlib.image.imread(plots["performance"])
    assert pixels.shape[:2] == (height, width)
    assert pixels[..., :3].std() > 0.05  # something was drawn


def test_odd_labels_and_missing_values_still_plot(tiny_results: dict, tmp_path: Path) -> None:
    comparison = tiny_results["comparisons"]["tp1-vs-tp2"]
    comparison["baseline_label"] = "cost $5 $\\frac{a}{b}$ \x07 <b>"
    comparison["performance"]["metrics"][0]["candidate"]["values"] = []
    comparison["performance"]["metrics"] = comparison["performance"]["metrics"][:4]
    tiny_results["comparisons"]["odd/name"] = comparison
    plots = write_performance_plots(typed(tiny_results), tmp_path)
    assert sorted(path.name for path in plots.values()) == ["odd_name.png", "tp1-vs-tp2.png"]
    for path in plots.values():
        width, height = _png_size(path)
        assert width >= 800 and height >= 400


def test_a_long_label_is_wrapped_whole_never_cut(tiny_results: dict) -> None:
    """A picture cannot link to results.json, so no text in it carries a cut marker (issue 49: the capacity plot
    printed "[4 characters cut; ...]"); an over-long case label is wrapped, every word of it kept."""
    comparison = tiny_results["comparisons"]["tp1-vs-tp2"]
    label = "native DP1/TP1, CUDA graph 64, profiler, NCCL flight recorder, model runner V2, " + "word " * 20
    comparison["baseline_label"] = label
    figure = plot_comparison("tp1-vs-tp2", typed(tiny_results).comparisons["tp1-vs-tp2"], smoke_only=False)
    texts = [text.get_text() for text in figure.findobj(Text)]
    assert not [text for text in texts if "characters cut" in text]
    assert any(" ".join(label.split()) == " ".join(text.split()) for text in texts)  # a tick label, whole


def test_the_one_png_writer_skips_figures_with_nothing_to_show_and_names_files_by_id(tmp_path: Path) -> None:
    """``write_pngs`` is what the report's plots and the trend's both write with: a None figure writes no file and
    an id becomes a safe file name; ``remove_pngs``, called first, takes the PNGs of an earlier render away."""
    (tmp_path / "stale.png").write_bytes(PNG_SIGNATURE)
    figure = Figure(figsize=(8, 4), dpi=DPI)
    FigureCanvasAgg(figure)
    figure.subplots().plot([0, 1], [1, 0])

    remove_pngs(tmp_path)
    written = write_pngs([("a/b", figure), ("empty", None)], tmp_path)

    assert written == {"a/b": tmp_path / "a_b.png"}
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["a_b.png"]
    assert _png_size(written["a/b"]) == (800, 400)


def test_each_metric_is_drawn_as_its_verdict_judged_it(seed_results: dict) -> None:
    """The seed's plot drew mean ± std bars, not what the verdict used: each metric now has a strip with the
    delta's 90% equivalence interval against the shaded ±margin and its 95% interval, in the verdict's colour,
    so TTFT's worse (its interval past +5%) and TPOT's parity (inside ±5%) read from the picture."""
    comparison = typed(seed_results).comparisons["performance"]
    figure = plot_comparison("performance", comparison, smoke_only=False)
    assert not any(ax.containers for ax in figure.axes)  # no ± std error bar
    assert "mean ± std" not in figure.get_suptitle()
    strips = [ax for ax in figure.axes if ax.get_xlabel().startswith("delta, % of baseline")]  # in metric order
    for metric, strip in zip(comparison.section(PERFORMANCE).metrics, strips, strict=True):
        assert "90% interval" in strip.get_xlabel() and metric.verdict in strip.get_xlabel()
        (margin,) = [p for p in strip.patches if p.get_label() == f"±{metric.margin_pct:g}% margin"]
        xs = margin.get_patch_transform().transform(margin.get_path().vertices)[:, 0]
        assert (xs.min(), xs.max()) == (-metric.margin_pct, metric.margin_pct)
        lines = {line.get_label(): line for line in strip.get_lines()}
        assert list(lines["90% interval"].get_xdata()) == metric.ci90_pct
        assert list(lines["95% interval"].get_xdata()) == metric.ci95_pct
        assert lines["90% interval"].get_color() == VERDICT_COLORS[metric.verdict]
    ttft, tpot = (
        next(m for m in comparison.section(PERFORMANCE).metrics if m.key == k) for k in ("mean_ttft_ms", "mean_tpot_ms")
    )
    assert (ttft.verdict, tpot.verdict) == (Verdict.WORSE, Verdict.PARITY)
    assert (
        ttft.ci90_pct[0] > ttft.margin_pct and -tpot.margin_pct < tpot.ci90_pct[0] < tpot.ci90_pct[1] < tpot.margin_pct
    )


def test_a_parity_of_the_old_rule_is_drawn_as_no_equivalence_shown(tiny_results: dict) -> None:
    """The real tiny-cpu run was judged before equivalence testing (no margin, no 90% interval): its strips draw
    the 95% interval alone, say so, and never paint its "parity" (the 95% interval includes 0) as shown."""
    comparison = typed(tiny_results).comparisons["tp1-vs-tp2"]
    figure = plot_comparison("tp1-vs-tp2", comparison, smoke_only=True)
    strips = [ax for ax in figure.axes if ax.get_xlabel().startswith("delta, % of baseline")]
    for metric, strip in zip(comparison.section(PERFORMANCE).metrics, strips, strict=True):
        assert "95% interval (old rule, no margin)" in strip.get_xlabel() and not strip.patches
        (line,) = [line for line in strip.get_lines() if line.get_label() == "95% interval"]
        if metric.verdict is Verdict.PARITY:
            assert line.get_color() == VERDICT_COLORS[Verdict.INCONCLUSIVE]
