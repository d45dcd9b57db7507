"""One trend plot per comparison, ``trend/<comparison>.png``: each metric over the compared runs (history as
points, tonight as a large star), the baseline and the candidate case in one panel, and a dashed line at the build
where a regression or improvement started. Drawn on matplotlib's Agg canvas (no pyplot, no display).
"""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from afd_e2e.report.plots import BASELINE_COLOR, CANDIDATE_COLOR, DPI, plot_file_name
from afd_e2e.trend.analysis import IMPROVEMENT, REGRESSION
from afd_e2e.trend.compute import ComparisonSeries, TrendReport
from afd_e2e.trend.record import METRICS, metric

COLUMNS = 3
MAX_TICK_LABELS = 12


def _panel(ax, report: TrendReport, comparison: ComparisonSeries, key: str) -> bool:
    """Draw one metric; False when neither case has a value for it."""
    runs = [*report.history, report.tonight]
    drawn = False
    for case_id, label, color in (
        (comparison.baseline, comparison.baseline_label, BASELINE_COLOR),
        (comparison.candidate, comparison.candidate_label, CANDIDATE_COLOR),
    ):
        points = [(x, run.values[(case_id, key)]) for x, run in enumerate(runs[:-1]) if (case_id, key) in run.values]
        if points:
            ax.plot(*zip(*points, strict=True), "o-", color=color, alpha=0.55, markersize=4, linewidth=1, label=label)
            drawn = True
        tonight = report.tonight.values.get((case_id, key))
        if tonight is not None:
            ax.plot([len(runs) - 1], [tonight], "*", color=color, markersize=15, markeredgecolor="black", zorder=5)
            drawn = True
        for row in report.calls:
            if row.case_id == case_id and row.metric.key == key and row.status in (REGRESSION, IMPROVEMENT):
                start = next((x for x, run in enumerate(runs) if run.build == row.started), None)
                if start is not None:
                    style = "--" if row.status == REGRESSION else ":"
                    ax.axvline(start - 0.5, color=color, linestyle=style, linewidth=1.5)
                    ax.annotate(
                        f"{row.status} since {row.started.label}",
                        (start - 0.35, 0.98),
                        xycoords=("data", "axes fraction"),
                        fontsize=7,
                        color=color,
                        ha="left",
                        va="top",
                        rotation=90,
                    )
    spec = metric(key)
    ax.set_title(f"{spec.name} ({'higher' if spec.higher_is_better else 'lower'} is better)", fontsize=9)
    ax.set_ylabel(spec.unit, fontsize=8)
    step = max(1, math.ceil(len(runs) / MAX_TICK_LABELS))
    ticks = list(range(len(runs) - 1, -1, -step))[::-1]
    tonight = f"{report.tonight.build.label} (tonight)" if report.tonight.build.number else "tonight"
    ax.set_xticks(ticks, [runs[i].build.label if i < len(runs) - 1 else tonight for i in ticks], fontsize=7)
    ax.tick_params(axis="x", rotation=45)
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(alpha=0.3)
    return drawn


def plot_trend(report: TrendReport, comparison: ComparisonSeries) -> Figure | None:
    keys = [
        key
        for key in METRICS
        if any(
            (case, key) in run.values
            for run in [*report.history, report.tonight]
            for case in (comparison.baseline, comparison.candidate)
        )
    ]
    if not keys:
        return None
    rows = math.ceil(len(keys) / COLUMNS)
    figure = Figure(figsize=(4.6 * COLUMNS, 3.2 * rows + 1.0), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, COLUMNS, squeeze=False).flatten()
    for ax, key in zip(axes, keys, strict=False):
        _panel(ax, report, comparison, key)
    for ax in axes[len(keys) :]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        figure.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=8)
    figure.suptitle(
        f"{comparison.id}: trend over the last {len(report.history)} runs ({report.identity.hardware})\n"
        "points: earlier runs, star: tonight, dashed line: where a regression started",
        fontsize=10,
    )
    return figure


def write_trend_plots(report: TrendReport, trend_dir: Path) -> dict[str, Path]:
    """comparison id -> PNG path, replacing earlier trend plots."""
    trend_dir.mkdir(parents=True, exist_ok=True)
    for stale in trend_dir.glob("*.png"):
        stale.unlink()
    written = {}
    for comparison in report.comparisons:
        figure = plot_trend(report, comparison)
        if figure is not None:
            path = trend_dir / plot_file_name(comparison.id)
            figure.savefig(path, format="png", dpi=DPI)
            written[comparison.id] = path
    return written
