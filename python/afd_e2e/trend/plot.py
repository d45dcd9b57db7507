"""One trend plot per comparison, ``trend/<comparison>.png``: each metric over the compared runs (history as
points, tonight as a large star), the baseline and the candidate case in one panel, and a dashed line at the build
where a regression or improvement started. Drawn on matplotlib's Agg canvas (no pyplot, no display).

Each case's panel shows what the rule judged (``analysis.edges`` on the call's baseline, never recomputed here): the
baseline's median and the band two nights running must leave (shaded), the edges the nearer two of three nights must
pass on average (dotted); a regressed case shades its nights from the change's first build and names it in the
panel's title. The band's artists carry ids (``band <case>``, ``limit3 <case>``, ``median <case>``, ``regressed
<case>``) so a reader, and the tests, can find what was drawn.
"""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from afd_e2e.report.plots import BASELINE_COLOR, CANDIDATE_COLOR, DPI, remove_pngs, write_pngs
from afd_e2e.trend.analysis import IMPROVEMENT, REGRESSION, Call, edges
from afd_e2e.trend.compute import ComparisonSeries, TrendReport
from afd_e2e.trend.record import METRICS, metric

COLUMNS = 3
REGRESSED_COLOR = "#c0392b"
MAX_TICK_LABELS = 12


def _judged(ax, row: Call, color: str) -> None:
    """The baseline the call judged tonight against, and the limits ``moved`` holds the last 2 and 3 nights to."""
    if row.baseline is None:
        return
    low, high = edges(row.baseline, 2)
    ax.axhspan(low, high, color=color, alpha=0.12, linewidth=0, gid=f"band {row.case_id}")
    ax.axhline(row.baseline.centre, color=color, linewidth=0.8, alpha=0.7, gid=f"median {row.case_id}")
    for edge in edges(row.baseline, 3):
        ax.axhline(edge, color=color, linewidth=0.8, alpha=0.7, linestyle=":", gid=f"limit3 {row.case_id}")


def _panel(ax, report: TrendReport, comparison: ComparisonSeries, key: str) -> bool:
    """Draw one metric; False when neither case has a value for it."""
    runs = [*report.history, report.tonight]
    drawn = False
    regressed = []
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
            if row.case_id != case_id or row.metric.key != key:
                continue
            _judged(ax, row, color)
            if row.status in (REGRESSION, IMPROVEMENT):
                start = next((x for x, run in enumerate(runs) if run.build == row.started), None)
                if start is not None:
                    style = "--" if row.status == REGRESSION else ":"
                    ax.axvline(start - 0.5, color=color, linestyle=style, linewidth=1.5)
                    if row.status == REGRESSION:
                        regressed.append(f"{label}: regression since {row.started.label}")
                        ax.axvspan(
                            start - 0.5, len(runs) - 0.5, color=REGRESSED_COLOR, alpha=0.08, gid=f"regressed {case_id}"
                        )
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
    title = f"{spec.name} ({'higher' if spec.higher_is_better else 'lower'} is better)"
    ax.set_title("\n".join([title, *regressed]), fontsize=9, color=REGRESSED_COLOR if regressed else "black")
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
        "points: earlier runs, star: tonight, dashed line: where a regression started (shaded from there on)\n"
        "line: the median tonight was judged against, band: what two nights running must leave, "
        "dotted: what the nearer two of three nights must pass on average",
        fontsize=10,
    )
    return figure


def write_trend_plots(report: TrendReport, trend_dir: Path) -> dict[str, Path]:
    """comparison id -> PNG path, replacing earlier trend plots."""
    remove_pngs(trend_dir)
    return write_pngs(((comparison.id, plot_trend(report, comparison)) for comparison in report.comparisons), trend_dir)
