"""The one PNG writer and the colours the plots share: the performance phase's plot per comparison
(``report/performance_report.py``) and the trend's (``trend/plot.py``, a layer above) both write through
``write_pngs`` and draw the two sides in these colours; the report's render (``report/render.py``) and the trend
clear their folder's earlier PNGs with ``remove_pngs`` before any writer runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from matplotlib.figure import Figure

BASELINE_COLOR = "#4C72B0"
CANDIDATE_COLOR = "#DD8452"
DPI = 100


def plot_file_name(comparison_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", comparison_id) + ".png"


def remove_pngs(folder: Path) -> None:
    """The folder's PNGs of an earlier render, removed before a render writes its own, so a plot of a comparison or
    case that is gone is not uploaded with them. The render's to call, not a writer's: several writers share the
    report's plots folder, and none of them may remove another's."""
    for stale in folder.glob("*.png"):
        stale.unlink()


def write_pngs(figures: Iterable[tuple[str, Figure | None]], folder: Path) -> dict[str, Path]:
    """Each figure as ``folder/<id>.png`` (``plot_file_name``); a None figure (nothing to show) writes nothing.
    id -> path. The one PNG writer: the report's plots and the trend's (``trend/plot.py``, a layer above) both go
    through it."""
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for figure_id, figure in figures:
        if figure is not None:
            path = folder / plot_file_name(figure_id)
            figure.savefig(path, format="png", dpi=DPI)
            written[figure_id] = path
    return written
