"""A case's telemetry in the report: one timeline plot per case (``plots/telemetry-<case>.png``: per role its
requests in flight and running, token rate and KV-cache usage; per GPU its utilisation and memory, GPUs grouped by
role; phase boundaries and stalls marked, start-up shaded) and the annotation's Telemetry table (the summary, any
stall, the plot's link).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from afd_e2e.report.escape import markdown_text
from afd_e2e.report.section_renderers import AnnotationPart
from afd_e2e.results.model import RunResults, TelemetrySummary
from afd_e2e.telemetry.sampler import Timeline, read_telemetry

PLOT_KEY = "telemetry/"  # plots mapping key prefix: telemetry/<case id>
DPI = 100


def telemetry_plot_name(case_id: str) -> str:
    return "telemetry-" + re.sub(r"[^A-Za-z0-9._-]", "_", case_id) + ".png"


STARTUP_SHADE = "#F2D16B"
STALL_COLOR = "#C44E52"
IN_FLIGHT_COLOR = "#C44E52"
LABEL_ROW = 0.17  # a row of labels above the top panel, in its height


def startup_spans(timeline: Timeline) -> list[tuple[float, float]]:
    """Each ``startup`` mark to the next mark (the case ready, its first phase; a relaunched block's start-up too),
    or to the last sample where it never got ready: the spans where silence is loading and compiling, judged by
    log lines and CPU, not tokens."""
    last = max((sample["t"] for sample in timeline.samples), default=0.0)
    marks = sorted(timeline.marks)
    spans = []
    for index, (at, phase) in enumerate(marks):
        if phase == "startup":
            end = marks[index + 1][0] if index + 1 < len(marks) else last
            if end > at:
                spans.append((at, end))
    return spans


def _marks(ax: Any, timeline: Timeline) -> None:
    """Phase boundaries (dashed), stalls (red) and the start-up span (shaded) on one panel; their words go in the
    label rows above the top panel (``_labels``)."""
    for span in startup_spans(timeline):
        ax.axvspan(*span, color=STARTUP_SHADE, alpha=0.25, linewidth=0, zorder=0)
    for at, _phase in timeline.marks:
        ax.axvline(at, color="#888888", linewidth=0.8, linestyle="--")
    for at, _message in timeline.stalls:
        ax.axvline(at, color=STALL_COLOR, linewidth=1.5)


def _labels(ax: Any, timeline: Timeline) -> None:
    """Each phase's and stall's word above the top panel at its line, on the lowest row where it overlaps no word
    already placed (phases a few seconds apart, "smoke" then "capacity", printed over each other on one row);
    the start-up span's word names it as start-up, so a compiling engine's silence there reads as such."""
    spans = startup_spans(timeline)
    shaded = {start for start, _end in spans}
    words = [(at, phase, "#444444") for at, phase in timeline.marks if not (phase == "startup" and at in shaded)]
    words += [(at, "stall", STALL_COLOR) for at, _message in timeline.stalls]
    words += [(start, "start-up (loading, compiling)", "#8A6D00") for start in shaded]
    renderer = ax.figure.canvas.get_renderer()
    placed: list[list[Any]] = []  # per row, the extents of its words
    for at, word, color in sorted(words):
        text = ax.text(at, 1.0, f" {word}", transform=ax.get_xaxis_transform(), fontsize=7, va="bottom", color=color)
        text.set_clip_on(False)
        for row, extents in enumerate([*placed, []]):
            text.set_y(1.02 + row * LABEL_ROW)
            extent = text.get_window_extent(renderer)
            if not any(extent.overlaps(other) for other in extents):
                if row == len(placed):
                    placed.append([])
                placed[row].append(extent)
                break


def plot_timeline(timeline: Timeline) -> Figure:
    """Rows: per role its engine (in flight, running, waiting; tokens/s; KV usage), then per role its GPUs."""
    header, samples = timeline.header, timeline.samples
    roles: dict[str, Any] = header.get("roles", {})
    t = [s["t"] for s in samples]
    rows: list[tuple[str, str, Any]] = []
    for name in roles:
        rows.append((name, "requests", None))
        rows.append((name, "tokens/s", None))
        rows.append((name, "KV cache", None))
    gpu_roles = [(name, info["devices"]) for name, info in roles.items() if info.get("devices")]
    has_gpus = any(s.get("gpus") for s in samples)
    if has_gpus:
        for name, _devices in gpu_roles:
            rows.append((name, "GPU util %", None))
            rows.append((name, "GPU memory GiB", None))
    figure = Figure(figsize=(11, 1.6 * len(rows) + 0.9), dpi=DPI)
    FigureCanvasAgg(figure)
    axes = figure.subplots(len(rows), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (name, what, _) in zip(axes, rows, strict=True):
        metrics = [(s["metrics"] or {}).get(name) or {} for s in samples]
        if what == "requests":
            ax.plot(t, [m.get("running") for m in metrics], label="running", color="#4C72B0", linewidth=2.2)
            ax.plot(t, [m.get("waiting") for m in metrics], label="waiting", color="#DD8452")
            if roles[name].get("serves_api"):  # above the engine's lines, dashed: where they agree, both show
                in_flight = [s["in_flight"] for s in samples]
                ax.plot(t, in_flight, label="in flight (client side)", color=IN_FLIGHT_COLOR, linestyle="--", zorder=3)
        elif what == "tokens/s":
            for key, color in (("generation_tokens", "#55A868"), ("prompt_tokens", "#8172B2")):
                ax.plot(t[1:], _rate(t, [m.get(key) for m in metrics]), label=key.replace("_", " "), color=color)
        elif what == "KV cache":
            ax.plot(t, [_pct(m.get("kv_cache_usage")) for m in metrics], label="KV usage %", color="#937860")
        else:
            devices = set(roles[name]["devices"])
            for device in sorted(devices):
                gpus = [next((g for g in s.get("gpus", []) if g["index"] == device), {}) for s in samples]
                if what == "GPU util %":
                    ax.plot(t, [g.get("util_pct") for g in gpus], label=f"GPU {device}")
                else:
                    ax.plot(t, [_gib(g.get("memory_used_mib")) for g in gpus], label=f"GPU {device}")
        ax.set_ylabel(f"{name}\n{what}", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
        _marks(ax, timeline)
    _labels(axes[0], timeline)
    axes[-1].set_xlabel("seconds since launch", fontsize=8)
    figure.suptitle(
        f"telemetry of {header.get('case', '?')}: budgets.stall_s = {header.get('stall_s')} s "
        "(a stall: no token while requests wait; in start-up: no log line and no CPU)",
        fontsize=10,
    )
    figure.tight_layout()
    return figure


def _rate(t: list[float], values: list[float | None]) -> list[float | None]:
    rates: list[float | None] = []
    for i in range(1, len(t)):
        a, b = values[i - 1], values[i]
        rates.append(None if a is None or b is None or t[i] <= t[i - 1] else max(b - a, 0.0) / (t[i] - t[i - 1]))
    return rates


def _pct(value: float | None) -> float | None:
    return None if value is None else value * 100.0


def _gib(value: float | None) -> float | None:
    return None if value is None else value / 1024.0


def write_telemetry_plots(results: RunResults, out_dir: Path, plots_dir: Path) -> dict[str, Path]:
    """One timeline per case whose telemetry file is there; keyed ``telemetry/<case id>``."""
    written = {}
    for case_id, case in results.cases.items():
        summary = case.section("telemetry")
        if not isinstance(summary, TelemetrySummary) or not summary.path or not (out_dir / summary.path).exists():
            continue
        timeline = read_telemetry(out_dir / summary.path)
        if not timeline.samples:
            continue
        plots_dir.mkdir(parents=True, exist_ok=True)
        path = plots_dir / telemetry_plot_name(case_id)
        plot_timeline(timeline).canvas.print_png(str(path))
        written[PLOT_KEY + case_id] = path
    return written


def _figure(value: float | None, unit: str = "", digits: str = ".1f") -> str:
    return "—" if value is None else f"{value:{digits}}{unit}"


def telemetry_section(results: RunResults, plots: Mapping[str, str]) -> list[AnnotationPart]:
    rows = []
    for case_id, case in results.cases.items():
        summary = case.section("telemetry")
        if not isinstance(summary, TelemetrySummary):
            continue
        plot = plots.get(PLOT_KEY + case_id)
        link = f"[timeline](artifact://{quote(plot, safe='/._-')})" if plot else "—"
        for role in summary.roles:
            kv = None if role.peak_kv_cache_usage is None else role.peak_kv_cache_usage * 100
            rows.append(
                f"| {markdown_text(case_id)} | {markdown_text(role.role)} | {_figure(role.mean_gpu_util_pct, '%')} "
                f"| {_figure(kv, '%')} | {_figure(role.preemptions, '', '.0f')} | {link} |"
            )
        for stall in summary.stalls:
            kept = " (processes kept up)" if stall.kept else ""
            rows.append(f"| {markdown_text(case_id)} | ⚠️ | {markdown_text(stall.message, 300)}{kept} | | | |")
    if not rows:
        return []
    text = "\n".join(
        [
            "### Telemetry",
            "",
            "Per role: mean GPU utilisation during performance, peak KV-cache usage and preemptions over the case.",
            "",
            "| Case | Role | GPU util | Peak KV | Preemptions | Plot |",
            "| --- | --- | ---: | ---: | ---: | --- |",
            *rows,
        ]
    )
    return [AnnotationPart(text + "\n", title="Telemetry", essential=False)]
