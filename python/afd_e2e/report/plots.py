"""One PNG per comparison, ``plots/<comparison>.png``: every metric's per-repetition values and mean ± std,
baseline beside candidate, so a reviewer sees the spread behind each delta.

Drawn on matplotlib's Agg canvas directly (no pyplot): no display, no global figure state.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from afd_e2e.report import formatting
from afd_e2e.report.escape import picture_text
from afd_e2e.results.model import Comparison, MetricComparison, PerformanceComparison, RunResults

COLUMNS = 3
BASELINE_COLOR = "#4C72B0"
CANDIDATE_COLOR = "#DD8452"
DPI = 100


def plot_file_name(comparison_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", comparison_id) + ".png"


def _plain(text: object, width: int = 28) -> str:
    """Label text as the picture shows it (``picture_text``: whole, wrapped to fit under a tick, never cut)."""
    return picture_text(text, width) or "?"


def _draw_metric(ax: Any, comparison: Comparison, metric: MetricComparison) -> None:
    """Repetitions as points spread around the side's position; mean ± std as an error bar just right of them."""
    for position, stats, color in ((0, metric.baseline, BASELINE_COLOR), (1, metric.candidate, CANDIDATE_COLOR)):
        values = stats.values
        spread = 0.12 if len(values) > 1 else 0.0
        offsets = [position - 0.1 - spread + 2 * spread * i / max(len(values) - 1, 1) for i in range(len(values))]
        ax.scatter(offsets, values, color=color, alpha=0.6, s=22, zorder=3)
        bar = {"fmt": "_", "markersize": 16, "elinewidth": 2, "capsize": 6, "zorder": 4}
        ax.errorbar(position + 0.18, stats.mean, yerr=stats.std, color=color, **bar)
    labels = [_plain(label, 18) for label in (comparison.baseline_label, comparison.candidate_label)]
    ax.set_xticks([0, 1], labels, fontsize=8)
    ax.set_xlim(-0.6, 1.6)
    ax.set_ylabel(_plain(metric.unit, 20), fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    direction = "higher is better" if metric.higher_is_better else "lower is better"
    delta = f"{formatting.percent(metric.delta_pct)}, {metric.verdict} ({direction})"
    ax.set_title(f"{_plain(metric.name, 40)}\n{delta}", fontsize=9)
    ax.grid(axis="y", alpha=0.3)


def plot_comparison(comparison_id: str, comparison: Comparison, *, smoke_only: bool) -> Figure | None:
    """The comparison's figure, or None when it has no performance metrics to show."""
    performance: PerformanceComparison | None = comparison.performance
    metrics = performance.metrics if performance else []
    if not performance or not metrics:
        return None
    rows = math.ceil(len(metrics) / COLUMNS)
    columns = min(len(metrics), COLUMNS)
    figure = Figure(figsize=(4.2 * columns, 3.4 * rows + 0.8), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, columns, squeeze=False).flatten()
    for ax, metric in zip(axes, metrics, strict=False):
        _draw_metric(ax, comparison, metric)
    for ax in axes[len(metrics) :]:
        ax.set_visible(False)
    notes = [note for note, on in (("control run", performance.control), ("SMOKE: not meaningful", smoke_only)) if on]
    title = (
        f"{_plain(comparison_id, 60)}: {_plain(comparison.candidate_label, 60)} vs "
        f"{_plain(comparison.baseline_label, 60)}"
        + (f" ({', '.join(notes)})" if notes else "")
        + "\npoints: repetitions; bars: mean ± std"
    )
    figure.suptitle(title, fontsize=10)
    return figure


def write_plots(results: RunResults, plots_dir: Path) -> dict[str, Path]:
    """Write one PNG per comparison with metrics, replacing those of an earlier render; comparison id -> path."""
    figures = (
        (comparison_id, plot_comparison(comparison_id, comparison, smoke_only=results.smoke_only))
        for comparison_id, comparison in results.comparisons.items()
    )
    return write_pngs(figures, plots_dir)


def write_pngs(figures: Iterable[tuple[str, Figure | None]], folder: Path) -> dict[str, Path]:
    """Each figure as ``folder/<id>.png`` (``plot_file_name``), after removing the folder's PNGs of an earlier
    render; a None figure (nothing to show) writes nothing. id -> path. The one PNG writer: the report's plots and
    the trend's (``trend/plot.py``, a layer above) both go through it."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.png"):
        stale.unlink()
    written = {}
    for figure_id, figure in figures:
        if figure is not None:
            path = folder / plot_file_name(figure_id)
            figure.savefig(path, format="png", dpi=DPI)
            written[figure_id] = path
    return written
