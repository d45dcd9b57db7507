"""One PNG per comparison, ``plots/<comparison>.png``: every metric's per-repetition values and mean ± std,
baseline beside candidate, so a reviewer sees the spread behind each delta.

Drawn on matplotlib's Agg canvas directly (no pyplot): no display, no global figure state.
"""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from afd_e2e.report import formatting
from afd_e2e.report.escape import one_line

COLUMNS = 3
BASELINE_COLOR = "#4C72B0"
CANDIDATE_COLOR = "#DD8452"
DPI = 100


def plot_file_name(comparison_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", comparison_id) + ".png"


def _plain(text: object, width: int = 28) -> str:
    """Label text as matplotlib shows it literally ('$' would start mathtext), wrapped to fit under a tick."""
    return "\n".join(textwrap.wrap(one_line(text, 80).replace("$", r"\$"), width)) or "?"


def _side_label(comparison: dict, side: str) -> object:
    return comparison.get(f"{side}_label") or comparison.get(side)


def _draw_metric(ax: Any, comparison: dict, metric: dict) -> None:
    """Repetitions as points spread around the side's position; mean ± std as an error bar just right of them."""
    for position, side, color in ((0, "baseline", BASELINE_COLOR), (1, "candidate", CANDIDATE_COLOR)):
        stats = metric.get(side) or {}
        values = [v for v in stats.get("values") or [] if isinstance(v, (int, float))]
        spread = 0.12 if len(values) > 1 else 0.0
        offsets = [position - 0.1 - spread + 2 * spread * i / max(len(values) - 1, 1) for i in range(len(values))]
        ax.scatter(offsets, values, color=color, alpha=0.6, s=22, zorder=3)
        if stats.get("mean") is not None:
            bar = {"fmt": "_", "markersize": 16, "elinewidth": 2, "capsize": 6, "zorder": 4}
            ax.errorbar(position + 0.18, stats["mean"], yerr=stats.get("std") or 0.0, color=color, **bar)
    labels = [_plain(_side_label(comparison, side), 18) for side in ("baseline", "candidate")]
    ax.set_xticks([0, 1], labels, fontsize=8)
    ax.set_xlim(-0.6, 1.6)
    ax.set_ylabel(_plain(metric.get("unit") or "", 20), fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    direction = "higher is better" if metric.get("higher_is_better") else "lower is better"
    delta = f"{formatting.percent(metric.get('delta_pct'))}, {metric.get('verdict') or '?'} ({direction})"
    ax.set_title(f"{_plain(metric.get('name') or metric.get('key'), 40)}\n{delta}", fontsize=9)
    ax.grid(axis="y", alpha=0.3)


def plot_comparison(comparison_id: str, comparison: dict, *, smoke_only: bool) -> Figure | None:
    """The comparison's figure, or None when it has no performance metrics to show."""
    performance = comparison.get("performance") or {}
    metrics = performance.get("metrics") or []
    if not metrics:
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
    notes = [
        note for note, on in (("control run", performance.get("control")), ("SMOKE: not meaningful", smoke_only)) if on
    ]
    title = (
        f"{_plain(comparison_id, 60)}: {_plain(_side_label(comparison, 'candidate'), 60)} vs "
        f"{_plain(_side_label(comparison, 'baseline'), 60)}"
        + (f" ({', '.join(notes)})" if notes else "")
        + "\npoints: repetitions; bars: mean ± std"
    )
    figure.suptitle(title, fontsize=10)
    return figure


def write_plots(results: dict[str, Any], plots_dir: Path) -> dict[str, Path]:
    """Write one PNG per comparison with metrics, replacing those of an earlier render; comparison id -> path."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    for stale in plots_dir.glob("*.png"):
        stale.unlink()
    written = {}
    for comparison_id, comparison in (results.get("comparisons") or {}).items():
        figure = plot_comparison(comparison_id, comparison, smoke_only=bool(results.get("smoke_only")))
        if figure is not None:
            path = plots_dir / plot_file_name(comparison_id)
            figure.savefig(path, format="png", dpi=DPI)
            written[comparison_id] = path
    return written
