"""One PNG per comparison, ``plots/<comparison>.png``: per metric its repetitions and their means, baseline beside
candidate, and under them what the verdict judged: the delta with its 90% equivalence interval against the ±margin
(parity when it lies inside) and its 95% interval (better/worse when it excludes 0), so the picture says parity,
worse or inconclusive as the annotation's text bar does.

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
from afd_e2e.results.status import Verdict

COLUMNS = 3
BASELINE_COLOR = "#4C72B0"
CANDIDATE_COLOR = "#DD8452"
DPI = 100


def plot_file_name(comparison_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", comparison_id) + ".png"


def _plain(text: object, width: int = 28) -> str:
    """Label text as the picture shows it (``picture_text``: whole, wrapped to fit under a tick, never cut)."""
    return picture_text(text, width) or "?"


VERDICT_COLORS = {
    Verdict.PARITY: "#55A868",
    Verdict.WORSE: "#C44E52",
    Verdict.BETTER: "#4C72B0",
    Verdict.INCONCLUSIVE: "#8C8C8C",
}
MARGIN_SHADE = "#55A868"
LEGEND = (
    "points: repetitions, tick: their mean; strip below each: the delta (dot), its 90% equivalence interval (thick) "
    "against the ±margin (shaded: parity when the thick bar lies inside it) and its 95% interval (thin: better or "
    "worse when it excludes 0)"
)


def _draw_metric(ax: Any, comparison: Comparison, metric: MetricComparison) -> None:
    """Repetitions as points spread around the side's position, their mean as a tick just right of them (the
    spread is the points themselves: a ± std bar would read as the interval the verdict judged, which it is not)."""
    for position, stats, color in ((0, metric.baseline, BASELINE_COLOR), (1, metric.candidate, CANDIDATE_COLOR)):
        values = stats.values
        spread = 0.12 if len(values) > 1 else 0.0
        offsets = [position - 0.1 - spread + 2 * spread * i / max(len(values) - 1, 1) for i in range(len(values))]
        ax.scatter(offsets, values, color=color, alpha=0.6, s=22, zorder=3)
        if stats.mean is not None:
            ax.plot([position + 0.18], [stats.mean], marker="_", markersize=16, markeredgewidth=2, color=color)
    labels = [_plain(label, 18) for label in (comparison.baseline_label, comparison.candidate_label)]
    ax.set_xticks([0, 1], labels, fontsize=8)
    ax.set_xlim(-0.6, 1.6)
    ax.set_ylabel(_plain(metric.unit, 20), fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    direction = "higher is better" if metric.higher_is_better else "lower is better"
    delta = f"{formatting.percent(metric.delta_pct)}, {metric.verdict} ({direction})"
    ax.set_title(f"{_plain(metric.name, 40)}\n{delta}", fontsize=9)
    ax.grid(axis="y", alpha=0.3)


def _finite(bounds: list[float] | None) -> list[float] | None:
    return list(bounds) if bounds and len(bounds) == 2 and all(math.isfinite(b) for b in bounds) else None


def _draw_verdict(ax: Any, metric: MetricComparison) -> None:
    """What the verdict judged, in % of the baseline's mean: the ±margin shaded, 0, the 90% equivalence interval
    (thick; parity when it lies inside the shade), the 95% interval (thin; better/worse when it excludes 0 and
    the delta passes the threshold) and the delta (dot), in the verdict's colour. Results from before equivalence
    testing have no margin: their 95% interval alone, said so."""
    old_parity = metric.verdict is Verdict.PARITY and not metric.judged_by_equivalence  # no equivalence shown
    color = VERDICT_COLORS[Verdict.INCONCLUSIVE if old_parity else metric.verdict]
    ci90, ci95, margin = _finite(metric.ci90_pct), _finite(metric.ci95_pct), metric.margin_pct
    reach = [abs(b) for b in (*(ci90 or []), *(ci95 or []))] + [abs(metric.delta_pct or 0.0)]
    half_width = 1.15 * max(2 * (margin or 0.0), *reach, 1e-9)
    ax.set_xlim(-half_width, half_width)
    ax.set_ylim(-1, 1)
    ax.set_yticks([])
    if margin:
        ax.axvspan(-margin, margin, color=MARGIN_SHADE, alpha=0.15, linewidth=0, label=f"±{margin:g}% margin")
    ax.axvline(0, color="#444444", linewidth=0.8)
    if ci95:
        ax.plot(ci95, [0, 0], color=color, linewidth=1.2, solid_capstyle="butt", label="95% interval")
    if ci90 and metric.judged_by_equivalence:
        ax.plot(ci90, [0, 0], color=color, linewidth=6, solid_capstyle="butt", alpha=0.8, label="90% interval")
    if metric.delta_pct is not None:
        ax.plot([metric.delta_pct], [0], marker="o", color="black", markersize=4, linestyle="none")
    if not ci90 and not ci95:
        ax.text(0.5, 0.5, "no interval", transform=ax.transAxes, ha="center", va="center", fontsize=8)
    rule = f"90% interval vs ±{margin:g}%" if metric.judged_by_equivalence else "95% interval (old rule, no margin)"
    ax.set_xlabel(f"delta, % of baseline: {rule} → {metric.verdict}", fontsize=8, color=color)
    ax.tick_params(axis="x", labelsize=7)


def plot_comparison(comparison_id: str, comparison: Comparison, *, smoke_only: bool) -> Figure | None:
    """The comparison's figure, or None when it has no performance metrics to show: per metric its repetitions
    above the strip of what its verdict judged."""
    performance: PerformanceComparison | None = comparison.performance
    metrics = performance.metrics if performance else []
    if not performance or not metrics:
        return None
    rows = math.ceil(len(metrics) / COLUMNS)
    columns = min(len(metrics), COLUMNS)
    figure = Figure(figsize=(4.2 * columns, 4.3 * rows + 1.0), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    grid = figure.subplots(2 * rows, columns, squeeze=False, gridspec_kw={"height_ratios": [3, 1] * rows})
    for index, metric in enumerate(metrics):
        row, column = divmod(index, COLUMNS)
        _draw_metric(grid[2 * row, column], comparison, metric)
        _draw_verdict(grid[2 * row + 1, column], metric)
    for index in range(len(metrics), rows * columns):
        row, column = divmod(index, COLUMNS)
        grid[2 * row, column].set_visible(False)
        grid[2 * row + 1, column].set_visible(False)
    notes = [note for note, on in (("control run", performance.control), ("SMOKE: not meaningful", smoke_only)) if on]
    title = (
        f"{_plain(comparison_id, 60)}: {_plain(comparison.candidate_label, 60)} vs "
        f"{_plain(comparison.baseline_label, 60)}"
        + (f" ({', '.join(notes)})" if notes else "")
        + "\n"
        + _plain(LEGEND, 55 * columns)
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
