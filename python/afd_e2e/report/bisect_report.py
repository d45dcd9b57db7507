"""What a bisect shows: ``bisect.png`` (the metric per probed commit, in commit order, and below it, for a bench
metric, each commit's position between the endpoints with its interval) and the annotation section ``bisect.md``
(the conclusion, the probe table, the log to replay).

Drawn on matplotlib's Agg canvas like the other plots; everything from git (subjects) is escaped.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from afd_e2e.report import formatting
from afd_e2e.report.escape import markdown_text, one_line
from afd_e2e.report.status_icons import icon
from afd_e2e.results.bisect_records import BisectRecord, Probe
from afd_e2e.results.status import BisectWord, Status

PLOT_FILE = "bisect.png"
SECTION_FILE = "bisect.md"
DPI = 100
COLORS = {BisectWord.GOOD: "#55A868", BisectWord.BAD: "#C44E52", BisectWord.SKIPPED: "#8C8C8C"}
CORRECTNESS_UNITS = {"gsm8k": "GSM8K correct answers", "parity": "parity prompts matching the good revision"}


def plot_bisect(record: BisectRecord) -> Figure | None:
    """Every probed commit's values (points) and mean (bar) at its position in the commit list; None unprobed."""
    probes = sorted(record.probes, key=lambda p: p.index)
    if not probes:
        return None
    placed = [p for p in probes if p.position is not None and p.position_ci90]
    height = 6.4 if placed else 4.2
    figure = Figure(figsize=(max(6.0, 0.7 * len(record.commits) + 2), height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    if placed:
        ax, below = figure.subplots(2, 1, sharex=True, height_ratios=[3, 2])
        _draw_positions(below, record, probes)
    else:
        ax = figure.subplots()
    for probe in probes:
        color = COLORS[probe.word]
        if probe.values:
            ax.scatter([probe.index] * len(probe.values), probe.values, color=color, alpha=0.6, s=22, zorder=3)
            mean = sum(probe.values) / len(probe.values)
            ax.errorbar(probe.index, mean, fmt="_", markersize=16, color=color, zorder=4)
        else:
            ax.axvline(probe.index, color=color, linestyle=":", alpha=0.8)
    if record.first_bad:
        where = next(c for c, ref in enumerate(record.commits) if ref.sha == record.first_bad)
        ax.axvline(where - 0.5, color=COLORS[BisectWord.BAD], alpha=0.4, linewidth=2)
    axis = below if placed else ax
    axis.set_xticks(range(len(record.commits)), [c.sha[:7] for c in record.commits], rotation=45, fontsize=8)
    ax.set_xlim(-0.6, len(record.commits) - 0.4)
    ax.set_ylabel(CORRECTNESS_UNITS.get(record.metric, record.metric), fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    words = ", ".join(f"{word}: {color}" for word, color in (("good", "green"), ("bad", "red"), ("skipped", "grey")))
    figure.suptitle(
        f"bisect of {one_line(record.metric, 40)} on {one_line(record.profile, 40)}/{one_line(record.case, 40)}"
        f"\ncommits oldest first; points: runs' values, bar: mean ({words})",
        fontsize=9,
    )
    return figure


def _draw_positions(ax: Axes, record: BisectRecord, probes: list[Probe]) -> None:
    """Each commit's position between the endpoints (0 good, 1 bad) with its 90% interval; the endpoints at 0 and
    1, the middle the rule decides at dashed."""
    last = len(record.commits) - 1
    for probe in probes:
        color = COLORS[probe.word]
        if probe.position is not None and probe.position_ci90:
            low, high = probe.position_ci90
            ax.errorbar(
                probe.index,
                probe.position,
                yerr=[[probe.position - low], [high - probe.position]],
                fmt="o",
                color=color,
                capsize=3,
                markersize=5,
                zorder=3,
            )
        elif probe.index in (0, last) and probe.word is not BisectWord.SKIPPED:
            ax.scatter([probe.index], [0.0 if probe.index == 0 else 1.0], color=color, marker="s", s=30, zorder=3)
    ax.axhline(0.5, color="#444444", linestyle="--", linewidth=1, alpha=0.7)
    for level in (0.0, 1.0):
        ax.axhline(level, color="#888888", linewidth=0.8, alpha=0.5)
    ax.set_ylabel("position (0 good, 1 bad)", fontsize=8)
    ax.set_title("each commit between the endpoints, 90% interval: bad above the dashed middle", fontsize=8)
    ax.grid(axis="y", alpha=0.3)


def write_bisect_plot(record: BisectRecord, out_dir: Path) -> Path | None:
    figure = plot_bisect(record)
    if figure is None:
        return None
    path = out_dir / PLOT_FILE
    figure.savefig(path, format="png", dpi=DPI)
    return path


def _values(values: list[float]) -> str:
    if not values:
        return "–"
    mean = sum(values) / len(values)
    return f"{mean:.4g} (n={len(values)})"


def _judged(probe: Probe) -> str:
    """A commit between the endpoints: its position and interval; the bad revision: its verdict against good."""
    if probe.position is not None and probe.position_ci90:
        low, high = probe.position_ci90
        return f"position {probe.position:.2f} [{low:.2f}, {high:.2f}]"
    return str(probe.verdict or "–")


def render_bisect_section(record: BisectRecord) -> str:
    """The annotation section: headline, probe table in the order probed, range or first bad commit, the log."""
    status = {Status.PASSED: "first bad commit found", Status.CANCELLED: "cancelled"}.get(record.status, "no answer")
    lines = [
        f"### {icon(record.status)} Bisect of `{markdown_text(record.metric, 60)}` on "
        f"{markdown_text(record.profile, 80)} / {markdown_text(record.case, 80)}: {status}",
        "",
        markdown_text(record.conclusion, 400),
        "",
        f"{len(record.commits)} first-parent commits, {len(record.probes)} probed, {record.launches} runs "
        f"launched, {formatting.duration(record.seconds)} in all."
        + (f" Hunting a {record.hunted_pct:.1f}% move (the nightly trend's)." if record.hunted_pct else ""),
        "",
        "| # | commit | subject | word | judged | value | runs | seconds | why |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for number, probe in enumerate(record.probes, 1):
        cached, added = sum(run.cached for run in probe.runs), sum(bool(run.added) for run in probe.runs)
        notes = [f"{cached} cached"] * bool(cached) + [f"{added} added for other commits"] * bool(added)
        runs = f"{len(probe.runs)}" + (f" ({', '.join(notes)})" if notes else "")
        lines.append(
            f"| {number} | `{probe.commit[:12]}` | {markdown_text(probe.subject, 80)} | **{probe.word}** | "
            f"{_judged(probe)} | {_values(probe.values)} | {runs} | {probe.seconds:.0f} | "
            f"{markdown_text(probe.reason, 200)} |"
        )
    if record.range is not None:
        lines += ["", "The first bad commit is one of:", ""]
        lines += [f"- `{sha}`" for sha in record.range.commits]
    if record.plot:
        lines += ["", f'<img src="artifact://{quote(record.plot, safe="/._-")}" alt="the metric per probed commit">']
    lines += ["", f"Replay the words in the repository with `git bisect replay {record.log}`."]
    return "\n".join(lines) + "\n"


def write_bisect_report(record: BisectRecord, out_dir: Path) -> Path:
    """The plot (recorded in ``record.plot``) and the section; returns the section's path."""
    plot = write_bisect_plot(record, out_dir)
    record.plot = plot.name if plot else None
    path = out_dir / SECTION_FILE
    path.write_text(render_bisect_section(record), encoding="utf-8")
    return path
