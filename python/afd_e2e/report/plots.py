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


def _draw_metric(ax: Any, comparison: dict, metric: dict) -> None:
    sides = [
        (
            0,
            comparison.get("baseline_label") or comparison.get("baseline"),
            metric.get("baseline") or {},
            BASELINE_COLOR,
        ),
        (
            1,
            comparison.get("candidate_label") or comparison.get("candidate"),
            metric.get("candidate") or {},
            CANDIDATE_COLOR,
        ),
    ]
    for position, _, side, color in sides:
        values = [v for v in side.get("values") or [] if isinstance(v, (int, float))]
        spread = 0.12 if len(values) > 1 else 0.0
        offsets = [position - 0.1 - spread + 2 * spread * i / max(len(values) - 1, 1) for i in range(len(values))]
        ax.scatter(offsets, values, color=color, alpha=0.6, s=22, zorder=3, label=None)
        if side.get("mean") is not None:
            ax.errorbar(
                position + 0.18,
                side["mean"],
                yerr=side.get("std") or 0.0,
                fmt="_",
                markersize=16,
                color=color,
                ecolor=color,
                elinewidth=2,
                capsize=6,
                zorder=4,
            )
    ax.set_xticks([0, 1], [_plain(label, 18) for _, label, _, _ in sides], fontsize=8)
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
        f"{_plain(comparison_id, 60)}: {_plain(comparison.get('candidate_label'), 60)} vs "
        f"{_plain(comparison.get('baseline_label'), 60)}"
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
