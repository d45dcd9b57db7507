"""What users see of a capacity sweep: the plot per comparison (attainment, request throughput, and TTFT and TPOT at
the percentile the SLO's attainment names against the load, with the SLO lines and each case's capacity), the
annotation's tables and the JUnit testcases (one per case, one per comparison).

A case that no capacity comparison includes gets a plot of its own. Drawn on matplotlib's Agg canvas (no pyplot).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

from afd_e2e.profile.bench_spec import LATENCY_PERCENTILES
from afd_e2e.report.escape import markdown_text, picture_text
from afd_e2e.report.status_icons import icon
from afd_e2e.results.capacity_records import BRACKETED, CapacityComparison, CapacityLevel, CaseCapacity
from afd_e2e.results.model import RunResults
from afd_e2e.results.status import Status
from afd_e2e.workloads.capacity_sweep.compare import describe_capacity
from afd_e2e.workloads.capacity_sweep.level_search import format_level
from afd_e2e.workloads.capacity_sweep.sweep import level_key, level_metrics, slo_percentile

COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52")
DPI = 100
PLOT_KEY = "capacity:"  # the capacity plots' keys among the report's plots (comparison or case id after it)
NOT_MEANINGFUL = "SMOKE: these numbers mean nothing (a tiny random model on a shared CPU); the sweep proves the path"
TITLE_WIDTH = 185  # characters of the title's font that fit the figure's width (about 215), with a margin
LEGEND_WIDTH = 60  # characters per line of a legend entry (three entries side by side)
SLO_LINE = {"color": "red", "linestyle": "--", "linewidth": 1.2}
STAR = {"marker": "*", "s": 220, "edgecolor": "black", "zorder": 5}
# A capacity that is only a lower bound (no level missed the SLO): an open marker pointing up the load axis at the
# highest level that met it, never a star, which marks a measured crossing.
BOUND = {"marker": ">", "s": 140, "facecolors": "none", "linewidths": 1.8, "zorder": 5}


@dataclass(frozen=True)
class Side:
    case_id: str
    label: str
    capacity: CaseCapacity


def capacity_plot_name(key: str) -> str:
    return "capacity-" + re.sub(r"[^A-Za-z0-9._-]", "_", key) + ".png"


def _measured(section: CaseCapacity) -> list[CapacityLevel]:
    """The levels that measured an attainment, in increasing load: the order every curve is drawn in."""
    return sorted((lv for lv in section.levels if lv.attainment is not None), key=lambda lv: lv.level)


def _level_figures(level: CapacityLevel) -> dict[str, float]:
    """A level's metrics; a key the run did not keep yet (p90 before it was a level metric) from its repetitions
    by the sweep's own rule."""
    return {**level_metrics(level.repetitions), **level.metrics}


def at_capacity(section: CaseCapacity, key: str, *, log_scale: bool = False) -> float | None:
    """A level metric at the capacity load, interpolated between the two bracketing levels: geometrically for a
    metric drawn on a log axis, so that the marked point lies on the segment the plot draws between them."""
    est = section.estimate
    if est is None or est.outcome != BRACKETED or est.capacity is None:
        return None
    by_level = {lv.level: _level_figures(lv) for lv in _measured(section)}
    low, high = by_level.get(est.passed_level or -1, {}), by_level.get(est.failed_level or -1, {})
    if key not in low or key not in high or est.failed_level == est.passed_level:
        return None
    assert est.passed_level is not None and est.failed_level is not None
    share = (est.capacity - est.passed_level) / (est.failed_level - est.passed_level)
    if log_scale and low[key] > 0 and high[key] > 0:
        return low[key] * (high[key] / low[key]) ** share
    return low[key] + share * (high[key] - low[key])


def _capacity_mark(ax: Any, side: Side, color: str, y: float | None, *, bound_y: float | None = None) -> None:
    """The case's capacity: a dotted line at its load, in every panel, and a star where its curve crosses it. A
    lower bound (no level missed) is no crossing: an open marker at the highest level passed, at ``bound_y`` (that
    level's own value), and no line."""
    est = side.capacity.estimate
    if est is None or est.capacity is None:
        return
    if est.outcome != BRACKETED:
        if bound_y is not None:
            ax.scatter([est.capacity], [bound_y], edgecolors=color, **BOUND)
        return
    ax.axvline(est.capacity, color=color, linestyle=":", linewidth=1.2)
    if y is not None:
        ax.scatter([est.capacity], [y], color=color, **STAR)


def _bound_level(section: CaseCapacity) -> CapacityLevel | None:
    """The level a lower-bound capacity stands on (the highest passed); None for a crossing or no capacity."""
    est = section.estimate
    if est is None or est.capacity is None or est.outcome == BRACKETED:
        return None
    return next((lv for lv in _measured(section) if lv.level == est.capacity), None)


def _metric_panel(
    ax: Any,
    sides: Sequence[Side],
    key: str,
    title: str,
    unit: str,
    *,
    slo_ms: float | None = None,
    note: str = "",
) -> None:
    """One level metric against the load, a point per level; with an SLO, the latency is drawn on a log axis;
    ``note``: why the percentile drawn is not the one the SLO names, under the title."""
    for color, side in zip(COLORS, sides, strict=False):
        figures = [(lv.level, _level_figures(lv).get(key)) for lv in _measured(side.capacity)]
        points = [(level, value) for level, value in figures if value is not None]
        if points:
            ax.plot(*zip(*points, strict=True), marker="o", color=color)
        bound = _bound_level(side.capacity)
        _capacity_mark(
            ax,
            side,
            color,
            at_capacity(side.capacity, key, log_scale=slo_ms is not None),
            bound_y=None if bound is None else _level_figures(bound).get(key),
        )
    ax.set_ylabel(f"{title} ({unit})", fontsize=8)
    if slo_ms is None:
        ax.set_title(f"{title} vs load", fontsize=9)
        return
    ax.axhline(slo_ms, **SLO_LINE)
    ax.set_yscale("log")
    # 1-2-5 steps labelled as plain numbers: a latency read off the axis, not a power of ten
    ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_title(f"{title} vs load (SLO {slo_ms:g} {unit})" + (f"\n{note}" if note else ""), fontsize=9)


def _attainment_panel(ax: Any, sides: Sequence[Side]) -> None:
    """Attainment against the load: the mean per level, each repetition's as a faint dot, the target line and each
    capacity's 95% interval drawn on it."""
    target = sides[0].capacity.slo.attainment
    for color, side in zip(COLORS, sides, strict=False):
        levels = _measured(side.capacity)
        ax.plot([lv.level for lv in levels], [lv.attainment for lv in levels], marker="o", color=color)
        for level in levels:
            if len(level.attainments) > 1:
                ax.scatter([level.level] * len(level.attainments), level.attainments, color=color, s=8, alpha=0.5)
        bound = _bound_level(side.capacity)
        _capacity_mark(ax, side, color, target, bound_y=None if bound is None else bound.attainment)
        if bound is not None:
            ax.annotate(
                f"≥ {format_level(bound.level)}",
                xy=(bound.level, bound.attainment),
                xytext=(26, 0),
                textcoords="offset points",
                arrowprops={"arrowstyle": "<-", "color": color},
                va="center",
                color=color,
                fontsize=8,
            )
        est = side.capacity.estimate
        if est is not None and est.interval is not None:
            ax.plot(est.interval, [target] * 2, color=color, linewidth=5, alpha=0.7, zorder=4)
    ax.axhline(target, **SLO_LINE)
    ax.set_ylabel("SLO attainment (share of requests)", fontsize=8)
    ax.set_ylim(-0.03, 1.05)
    ax.set_title(f"attainment vs load (target {target:.0%})", fontsize=9)


def _legend(figure: Figure, sides: Sequence[Side]) -> None:
    """One legend for the four panels, below them: the cases' colours and what the marks drawn mean."""
    slo = sides[0].capacity.slo
    estimates = [side.capacity.estimate for side in sides if side.capacity.estimate is not None]
    handles = [
        Line2D([], [], color=color, marker="o", label=picture_text(side.label, LEGEND_WIDTH))
        for color, side in zip(COLORS, sides, strict=False)
    ]
    slo_text = f"SLO: TTFT ≤ {slo.ttft_ms:g} ms, TPOT ≤ {slo.tpot_ms:g} ms for {slo.attainment:.0%} of requests"
    handles.append(Line2D([], [], **SLO_LINE, label=slo_text))
    if any(est.capacity is not None and est.outcome == BRACKETED for est in estimates):
        star = {"marker": "*", "markersize": 14, "markeredgecolor": "black"}
        handles.append(Line2D([], [], color="grey", linestyle=":", **star, label="capacity at SLO (dotted: its load)"))
    if any(est.capacity is not None and est.outcome != BRACKETED for est in estimates):
        bound = {"marker": ">", "markersize": 10, "markerfacecolor": "none", "markeredgewidth": 1.8}
        label = "capacity ≥ the highest level passed (no level missed: a lower bound)"
        handles.append(Line2D([], [], color="grey", linestyle="none", **bound, label=label))
    if any(est.interval is not None for est in estimates):
        handles.append(Line2D([], [], color="grey", linewidth=5, alpha=0.7, label="its 95% interval (on the target)"))
    figure.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=8, frameon=False)


def plot_capacity(title: str, sides: Sequence[Side]) -> Figure:
    """Four panels sharing one x axis, the load: attainment (which defines the capacity), request throughput, TTFT
    and TPOT, each case's capacity a dotted line across all four.

    The latencies are drawn at the percentile the SLO's attainment names (``slo_percentile``: p90 for 90% of
    requests), so the capacity star of the target that binds sits on its SLO line; at p99 it sat far above it
    (issue 44: p99 TPOT 33 ms at capacity against a 20 ms target). The other target's star lies under its line.

    The load is the axis because it is what the sweep sets and what the capacity is counted in; each curve then
    reads left to right, level by level, and the capacity lies at the same x in every panel. Latency against
    throughput, the usual picture, folds back once a server saturates (its throughput stops rising, or falls, as
    the load climbs: the 12-05 H200 graph case made 128 req/s at 36 concurrent requests and 103 at 68), so its
    lines zigzag and hide which load each point is; the throughput panel shows that saturation instead."""
    figure = Figure(figsize=(14, 9.5), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    (attained, throughput), (ttft, tpot) = figure.subplots(2, 2, sharex=True)
    section = sides[0].capacity
    _attainment_panel(attained, sides)
    _metric_panel(throughput, sides, "request_throughput", "request throughput", "req/s")
    drawn = slo_percentile(section.slo.attainment)
    for ax, stem, name, slo_ms in (
        (ttft, "ttft", "TTFT", section.slo.ttft_ms),
        (tpot, "tpot", "TPOT", section.slo.tpot_ms),
    ):
        key = level_key(stem, drawn.percentile)
        _metric_panel(ax, sides, key, f"p{drawn.percentile} {name}", "ms", slo_ms=slo_ms, note=drawn.note)
    for ax in (attained, throughput, ttft, tpot):
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
    for ax in (ttft, tpot):
        ax.set_xlabel(f"load: {section.variable} ({section.unit})", fontsize=8)
    _legend(figure, sides)
    lines = [title, *(f"{side.label}: {side.capacity.estimate.text}" for side in sides if side.capacity.estimate)]
    if not all(side.capacity.meaningful for side in sides):
        lines.append(NOT_MEANINGFUL)
    figure.suptitle("\n".join(picture_text(line, TITLE_WIDTH) for line in lines), fontsize=9)
    return figure


def _labels(results: RunResults) -> dict[str, str]:
    return {case.id: case.label for case in results.plan.cases}


def plot_groups(results: RunResults) -> dict[str, tuple[str, list[Side]]]:
    """Plot key -> (title, sides): one per capacity comparison, one per swept case that none includes."""
    labels = _labels(results)
    groups: dict[str, tuple[str, list[Side]]] = {}
    covered: set[str] = set()
    for comparison_id, comparison in results.comparisons.items():
        if comparison.section("capacity") is None:
            continue
        sides = [
            Side(case_id, f"{case_id} ({labels.get(case_id, case_id)})", section)
            for case_id in (comparison.baseline, comparison.candidate)
            if (case := results.case(case_id)) is not None and (section := case.section("capacity")) is not None
        ]
        if sides:
            covered.update(side.case_id for side in sides)
            title = f"{comparison_id}: {comparison.candidate_label} vs {comparison.baseline_label}"
            groups[comparison_id] = (title, sides)
    for case_id, case in results.cases.items():
        if (section := case.section("capacity")) is not None and case_id not in covered:
            groups[case_id] = (
                f"{case_id}: {labels.get(case_id, case_id)}",
                [Side(case_id, f"{case_id} ({case.label})", section)],
            )
    return groups


def write_capacity_plots(results: RunResults, plots_dir: Path) -> dict[str, Path]:
    """``plots/capacity-<comparison or case>.png``; ``capacity:<comparison or case id>`` -> path."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for key, (title, sides) in plot_groups(results).items():
        path = plots_dir / capacity_plot_name(key)
        plot_capacity(title, sides).savefig(path, format="png", dpi=DPI)
        written[PLOT_KEY + key] = path
    return written


# ---- annotation ---------------------------------------------------------------------------------------------------


def _figure(value: float | None, digits: str = ".0f") -> str:
    return "—" if value is None else format(value, digits)


def _saturated(level: CapacityLevel) -> str:
    """A level whose repetitions fell well below the asked rate (``workloads.bench.load_of``): which kind. Expected
    beyond capacity in a ``request_rate`` sweep, and said so the achieved rate is not read as the asked one."""
    kinds = sorted({str(rep.load.saturated) for rep in level.repetitions if rep.load and rep.load.saturated})
    return f" (saturated: {', '.join(kinds)})" if kinds else ""


def _percentiles(figures: Mapping[str, float], stem: str, digits: str) -> str:
    return " / ".join(_figure(figures.get(level_key(stem, p)), digits) for p in LATENCY_PERCENTILES)


def _level_rows(section: CaseCapacity) -> list[str]:
    rows = [
        "| Load | Status | Req/s | Out tok/s | TTFT p50 / p90 / p99 (ms) | TPOT p50 / p90 / p99 (ms) "
        "| ITL p50 / p90 / p99 (ms) "
        "| Goodput (req/s) | Attainment | SLO |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for lv in section.levels:
        m = _level_figures(lv)
        met = {True: "✅ met", False: "❌ missed", None: "—"}[lv.meets_slo]
        note = lv.note or lv.failure
        rows.append(
            f"| {format_level(lv.level)} | {icon(lv.status)} {lv.status}"
            + (f": {markdown_text(note, 120)}" if note else "")
            + f" | {_figure(m.get('request_throughput'), '.2f')}{_saturated(lv)} "
            f"| {_figure(m.get('output_throughput'), '.1f')} "
            f"| {_percentiles(m, 'ttft', '.0f')} | {_percentiles(m, 'tpot', '.1f')} | {_percentiles(m, 'itl', '.1f')} "
            f"| {_figure(m.get('request_goodput'), '.2f')} | {_figure(lv.attainment, '.0%')} | {met} |"
        )
    return rows


def _image(path: str, text: str) -> str:
    return f'<img src="artifact://{quote(path, safe="/._-")}" alt="{markdown_text(text)}">'


def capacity_section(results: RunResults, plots: Mapping[str, str]) -> str:
    """Markdown for the annotation, '' when no case ran a capacity sweep."""
    swept = {cid: section for cid, case in results.cases.items() if (section := case.section("capacity")) is not None}
    if not swept:
        return ""
    first = next(iter(swept.values()))
    slo = first.slo
    out = [
        "### Capacity at SLO\n",
        f"A load meets the SLO when at least {slo.attainment:.0%} of its requests have TTFT ≤ {slo.ttft_ms:g} ms and "
        f"TPOT ≤ {slo.tpot_ms:g} ms (vLLM's goodput). Capacity: the highest {markdown_text(first.variable)} that "
        "meets it, interpolated between the last level that met it and the first that missed.\n",
    ]
    if not all(section.meaningful for section in swept.values()):
        out.append(f"> **{NOT_MEANINGFUL}.**\n")
    out += [
        "| Case | Status | Capacity at SLO | GPUs | Per GPU | Levels run | Sweep time |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for case_id, section in swept.items():
        est = section.estimate
        per_gpu = "—"
        if est and est.capacity is not None and section.gpus:
            per_gpu = f"{format_level(est.capacity / section.gpus)} {markdown_text(section.unit)}"
        detail = "; ".join(text for text in (est.text if est else None, section.failure) if text)
        out.append(
            f"| <code>{markdown_text(case_id)}</code> | {icon(section.status)} {section.status} "
            f"| {markdown_text(detail, 240)} | {section.gpus or '—'} | {per_gpu} "
            f"| {len(_measured(section))} of {len(section.grid)} | {_figure(section.wall_s, '.0f')} s |"
        )
    rows = [(cid, cmp) for cid, cmp in results.comparisons.items() if cmp.section("capacity") is not None]
    if rows:
        out += ["", "| Comparison | Result | Verdict |", "| --- | --- | --- |"]
        for comparison_id, comparison in rows:
            cap = comparison.section("capacity")
            line = (
                cap.failure
                if cap.status is Status.SKIPPED
                else describe_capacity(cap, comparison.baseline_label, comparison.candidate_label)
            )
            verdict = f"{icon(capacity_status(cap))} {cap.verdict}" + (" (per GPU)" if cap.per_gpu else "")
            out.append(f"| <code>{markdown_text(comparison_id)}</code> | {markdown_text(line, 600)} | {verdict} |")
            out += [f"| | ⚠️ {markdown_text(w, 300)} | |" for w in cap.warnings]
    for key, path in plots.items():
        if key.startswith(PLOT_KEY):
            out.append(f"\n{_image(path, f'capacity plot: {key[len(PLOT_KEY) :]}')}")
    for case_id, section in swept.items():
        out.append(
            f"\n<details><summary>{markdown_text(case_id)}: every level</summary>\n\n"
            + "\n".join(_level_rows(section))
            + "\n\n</details>"
        )
    return "\n".join(out) + "\n"


# ---- JUnit --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CapacityTestcase:
    name: str
    status: Status
    message: str
    stdout: str
    seconds: float | None = None


def capacity_status(cap: CapacityComparison) -> Status:
    """A comparison's testcase: failed when a side failed or a worse capacity is gated ``fail``; warned when
    worse under ``warn`` or a sweep was cut short; passed otherwise."""
    if cap.status in (Status.FAILED, Status.SKIPPED):
        return cap.status
    if cap.warnings:
        return Status.WARNED
    return Status.PASSED


def case_testcase(section: CaseCapacity) -> CapacityTestcase:
    est = section.estimate
    text = est.text if est else "no estimate"
    levels = "\n".join(
        f"{format_level(lv.level)} {section.unit}: {lv.status}, attainment "
        f"{_figure(lv.attainment, '.0%')}{_saturated(lv)}"
        + (f" ({lv.failure or lv.note})" if lv.failure or lv.note else "")
        for lv in section.levels
    )
    status = section.status
    if status is Status.PASSED and est is not None and est.cut_short:
        status = Status.WARNED
    return CapacityTestcase("capacity at SLO", status, section.failure or text, f"{text}\n{levels}", section.wall_s)


def comparison_testcase(cap: CapacityComparison, baseline_label: str, candidate_label: str) -> CapacityTestcase:
    line = cap.failure if cap.status is Status.SKIPPED else describe_capacity(cap, baseline_label, candidate_label)
    message = cap.failure or "; ".join([line or "", *cap.warnings])
    return CapacityTestcase("capacity at SLO", capacity_status(cap), message, line or "")
