"""What the reports show of the performance phase (``afd_e2e.phases.performance``), registered by
``phases/rendering.py``:

- JUnit: a case's repetitions a testcase (``performance runs``, and ``performance runs <shape>`` per named load
  shape), each repetition a line with its load; a comparison's metrics a testcase each (``performance <metric>``,
  ``performance <shape> <metric>``), failed where the metric fails its gate (``on_worse: fail``, ``require:
  parity``, ``detect_pct``), warned where it is worse under ``warn`` or a side was compared in saturation, a
  control's never judged;
- the annotation: one section per comparison, laid out like the seed PR's, one table per load shape (each metric's
  sides, delta, 90% interval against the ±margin, verdict, what the repetitions could see, repetitions and noise),
  a ranged series' looks and blocks, the warnings, the gate and each side's repetitions with its saturation;
- the plot: one PNG per comparison, ``plots/<comparison>.png``: per metric its repetitions and their means,
  baseline beside candidate, and under them what the verdict judged: the delta with its 90% equivalence interval
  against the ±margin (parity when it lies inside) and its 95% interval (better/worse when it excludes 0), so the
  picture says parity, worse or inconclusive as the annotation's text bar does. Drawn on matplotlib's Agg canvas
  directly (no pyplot): no display, no global figure state.

Results written before equivalence testing (no margin) render as they did: their ``parity`` said to be the old
rule's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from afd_e2e.plan.model import BLOCKS
from afd_e2e.report import formatting
from afd_e2e.report.escape import markdown_text, picture_text
from afd_e2e.report.junit import SuiteTestcases
from afd_e2e.report.plots import BASELINE_COLOR, CANDIDATE_COLOR, DPI, write_pngs
from afd_e2e.report.section_renderers import AnnotationPart
from afd_e2e.report.status_icons import status_cell
from afd_e2e.results.model import CaseResults, Comparison, RunResults
from afd_e2e.results.performance_records import (
    SECTION,
    BlockRecord,
    CasePerformance,
    MetricComparison,
    PerformanceComparison,
    Repetition,
    SequentialRecord,
)
from afd_e2e.results.status import Status, Verdict
from afd_e2e.workloads.bench import load_text, saturation_line, shape_words
from afd_e2e.workloads.blocks import drift_lines
from afd_e2e.workloads.performance_comparison import fails as fails_its_gate
from afd_e2e.workloads.performance_comparison import undetectable_line

COLUMNS = 3  # the plot's metrics a row


# ---- JUnit --------------------------------------------------------------------------------------------------------


def performance_testcases(suite: SuiteTestcases, case: CaseResults) -> None:
    """The case's repetitions a testcase, and each named load shape's another (``performance runs burst``)."""
    if performance := case.section(SECTION):
        suite.add(
            "performance runs",
            performance.status,
            message=performance.failure,
            output=suite.log_tail,
            whole=suite.logs,
            stdout="\n".join(_repetition_line(rep) for rep in performance.repetitions),
            elapsed=case.timings.phases.get("performance"),
        )
        for name, shaped in performance.shapes.items():
            suite.add(
                f"performance runs {name}",
                shaped.status,
                message=shaped.failure,
                output=suite.log_tail,
                whole=suite.logs,
                stdout="\n".join(_repetition_line(rep) for rep in shaped.repetitions),
            )


def _repetition_line(rep: Repetition) -> str:
    """A repetition in one line: its outcome and counts, then its load (achieved against asked rate, the peak
    concurrency, SATURATED where it was) when results record one."""
    return (
        f"repetition {rep.index}: {rep.status}, {rep.completed}/{rep.num_prompts} "
        f"completed, {rep.failed} failed, {formatting.duration(rep.duration_s)}"
        + (f"; {load_text(rep.load)}" if rep.load else "")
        + (f" ({rep.failure})" if rep.failure else "")
    )


def performance_comparison_testcases(
    suite: SuiteTestcases, comparison: Comparison, performance: PerformanceComparison
) -> None:
    """A testcase per metric (``performance mean_ttft_ms``), and per metric of each named load shape
    (``performance burst mean_ttft_ms``), each judged by its own shape's verdict."""
    _metric_testcases(suite, comparison, performance, "performance")
    for name, shaped in performance.shapes.items():
        _metric_testcases(suite, comparison, shaped, f"performance {name}")


def _metric_testcases(
    suite: SuiteTestcases, comparison: Comparison, performance: PerformanceComparison, prefix: str
) -> None:
    if not performance.metrics:  # nothing to compare: the gate's own status says why
        suite.add(prefix, performance.status, message=performance.failure)
    blocks = _blocks_line(performance.sequential)
    for metric in performance.metrics:
        summary = _metric_line(comparison, metric, control=performance.control)
        saturated = [f"compared in saturation: {side}" for side in performance.saturated]
        stdout = "\n".join(line for line in (summary, _can_see_line(metric), blocks, *saturated) if line)
        message = f"{summary}; compared in saturation" if saturated else summary
        suite.add(f"{prefix} {metric.key}", _metric_status(metric, performance), message=message, stdout=stdout)


def _blocks_line(series: SequentialRecord | None) -> str:
    """A blocks series in one line: its blocks, the launches they added, and any side that drifted between its
    blocks (the repetitions came from fresh launches: a reader of the testcase must know)."""
    if series is None or series.alternation != BLOCKS or not series.blocks:
        return ""
    drifted = drift_lines(series)
    effect = "; ".join(drifted) if drifted else "each side's blocks agree within their repetitions' noise"
    return (
        f"alternating blocks of {series.step}: {len(series.blocks)} blocks, {series.launches} added launches; {effect}"
    )


def _can_see_line(metric: MetricComparison) -> str:
    """The smallest change the metric's repetitions could see (stats.detectable_pct), and the profile's ask."""
    if metric.detectable_pct is None:
        return ""
    asked = f" (detect_pct asks ±{metric.detect_pct:g}%)" if metric.detect_pct is not None else ""
    return f"can see ±{metric.detectable_pct:.1f}% (called different 80% of the time at this noise){asked}"


def _metric_status(metric: MetricComparison, performance: PerformanceComparison) -> Status:
    """A metric's testcase fails where it fails its gate (``workloads.performance_comparison.fails``: worse with
    ``on_worse: fail``, or not parity with ``require: parity``); worse with ``warn``, or either side measured in
    saturation, passes with a warning; a control run's metrics are shown, never judged. (A failed side fails its
    case's testcase.)"""
    if performance.status is Status.SKIPPED:
        return Status.SKIPPED
    if performance.control:
        return Status.PASSED
    if fails_its_gate(metric):
        return Status.FAILED
    warned = metric.verdict is Verdict.WORSE and metric.gated and metric.on_worse == "warn"
    return Status.WARNED if warned or performance.saturated else Status.PASSED


def _metric_line(comparison: Comparison, metric: MetricComparison, *, control: bool) -> str:
    """The metric in one line; an inconclusive one says why and how many repetitions would decide it, a required
    parity not shown leads with that, a ``parity`` of old results says it is the old rule's."""
    baseline = formatting.measure(metric.baseline.mean, metric.baseline.std, metric.unit)
    candidate = formatting.measure(metric.candidate.mean, metric.candidate.std, metric.unit)
    split = f" (split over {metric.looks} looks)" if metric.looks > 1 else ""
    if metric.judged_by_equivalence and metric.verdict in (Verdict.PARITY, Verdict.INCONCLUSIVE):
        interval = f"90% CI {formatting.interval(metric.ci90_pct)} against ±{metric.margin_pct:g}%{split}"
        verdict = str(metric.verdict)
    elif metric.judged_by_equivalence:
        interval = f"95% CI {formatting.interval(metric.ci95_pct)}{split}"
        verdict = str(metric.verdict)
    else:
        interval = f"95% CI {formatting.interval(metric.ci95_pct)}"
        old = " (old rule: the 95% CI includes 0, not equivalence)" if metric.verdict is Verdict.PARITY else ""
        verdict = f"{metric.verdict}{old}"
    line = (
        f"{metric.name}: {comparison.baseline_label} {baseline}, {comparison.candidate_label} {candidate}, "
        f"delta {formatting.percent(metric.delta_pct)}, {interval}, {verdict}"
        f" ({len(metric.baseline.values)}+{len(metric.candidate.values)} repetitions)"
    )
    if metric.reason:
        line += f": {metric.reason}"
    if metric.gated and metric.undetectable:
        return f"{undetectable_line(metric)}: {line}"
    if control:
        return line + " (control run, not headline evidence)"
    if metric.require == "parity" and metric.verdict is not Verdict.PARITY:
        return f"not shown at parity (require: parity): {line}"
    return line


# ---- annotation ---------------------------------------------------------------------------------------------------


def _repetitions_line(label: str, performance: CasePerformance | None) -> str:
    if performance is None:
        return f"- {label}: no performance runs recorded"
    reps = performance.repetitions
    passed = sum(rep.status is Status.PASSED for rep in reps)
    completed = [f"{markdown_text(rep.completed)}/{markdown_text(rep.num_prompts)}" for rep in reps]
    if not completed:
        requests = "no requests recorded"
    elif len(set(completed)) == 1:
        requests = f"{completed[0]} requests completed each"
    else:
        requests = f"requests completed {', '.join(completed)}"
    failed = sum(rep.failed or 0 for rep in reps)
    warmups = f"{len(performance.warmups)} warmup{'' if len(performance.warmups) == 1 else 's'}"
    line = f"- {label}: {passed}/{len(reps)} repetitions passed after {warmups}; {requests}; {failed} failed requests"
    if performance.failure:
        line += f"; {markdown_text(performance.failure, 200)}"
    if saturated := saturation_line(reps):
        line += f"; ⚠️ {markdown_text(saturated, 400)}"
    return line


def _metric_verdict(metric: MetricComparison, *, control: bool) -> str:
    """The verdict cell; a worse metric also says what its gate did (fail, warn or note), a required parity not
    shown fails it, and a ``parity`` of results written before equivalence testing says it is the old rule's."""
    if control:
        return markdown_text(metric.verdict) + (" (control, not judged)" if metric.verdict is Verdict.WORSE else "")
    if not metric.judged_by_equivalence and metric.verdict is Verdict.PARITY:
        return "parity (old rule: the 95% CI includes 0, not equivalence)"
    if fails_its_gate(metric) and metric.verdict is not Verdict.WORSE:
        return f"**{markdown_text(metric.verdict)}** ❌ parity required"
    if metric.verdict is not Verdict.WORSE:
        return markdown_text(metric.verdict) + ("" if metric.gated else " (not gated)")
    return "**worse** " + {"fail": "❌ fails the gate", "warn": "⚠️ warning"}.get(metric.on_worse, "(note)")


def _against_margin(metric: MetricComparison) -> str:
    """The equivalence interval and the text bar against ±margin (the 95% interval for old results)."""
    if not metric.judged_by_equivalence:
        return formatting.interval(metric.ci95_pct)
    bar = formatting.margin_bar(metric.ci90_pct, metric.margin_pct)
    shown = f"{formatting.interval(metric.ci90_pct)} ±{metric.margin_pct:g}%"
    return f"{shown} <code>{bar}</code>" if bar else shown


def _noise(metric: MetricComparison) -> str:
    """Each side's CV, and the flags: a warm-up effect over 5% (first measured repetition against the rest), the
    repetitions a MAD rule calls outliers."""
    sides = (("base", metric.baseline), ("cand", metric.candidate))
    cv = "/".join("—" if side.cv_pct is None else f"{side.cv_pct:.1f}%" for _, side in sides)
    flags = [f"CV {cv}"]
    for name, side in sides:
        if side.warmup_pct is not None and abs(side.warmup_pct) > WARMUP_FLAG_PCT:
            flags.append(f"⚠️ {name} warm-up {side.warmup_pct:+.1f}%")
        if side.outliers:
            flags.append(f"⚠️ {name} outlier rep {', '.join(map(str, side.outliers))}")
    return "; ".join(flags)


WARMUP_FLAG_PCT = 5.0  # a first measured repetition this far from the rest: the warmups were too few


def _series_lines(series: SequentialRecord | None) -> list[str]:
    """How the repetitions came about: a series' looks, why it stopped, the order the repetitions ran."""
    if series is None:
        return []
    if not series.looks:
        if series.stopped == "not run":
            return [f"- Sequential series not run: {markdown_text(series.reason)}"]
        stopped = f"- Sequential series stopped before its first look: {markdown_text(series.stopped)}, "
        return [stopped + markdown_text(series.reason), *_block_lines(series)]
    looks = ", ".join(
        f"{look.look}: {look.baseline_repetitions}+{look.candidate_repetitions} "
        + ("/".join(markdown_text(v) for v in look.verdicts.values()) or "nothing gated")
        for look in series.looks
    )
    order = ", ".join(series.order[2 * series.min :]) or "none"
    return [
        f"- Sequential series ({series.min} to {series.max} repetitions a side, alternating {series.alternation}, "
        + (
            "one planned look"
            if series.planned_looks == 1
            else f"error rates split over {series.planned_looks} planned looks"
        )
        + f"): {markdown_text(series.stopped)}, {markdown_text(series.reason)}",
        f"- Looks (repetitions base+cand, gated verdicts): {markdown_text(looks, 600)}",
        f"- Added repetitions in the order run: {markdown_text(order, 600)}",
        *_block_lines(series),
    ]


def _block_lines(series: SequentialRecord) -> list[str]:
    """A blocks series' launches, each block's repetitions and checks, and each side's block effect."""
    if series.alternation != BLOCKS:
        return []

    def block(b: BlockRecord) -> str:
        reps = f"reps {b.repetitions[0]}-{b.repetitions[-1]}" if b.repetitions else "no reps"
        if b.block == 1:
            return f"{b.side} 1 ({reps}, the case's own launch)"
        checks = "hygiene " + ("passed" if all(c.status is Status.PASSED for c in b.hygiene) else "failed")
        ready = f", ready in {b.launch_to_ready_s:.0f} s" if b.launch_to_ready_s is not None else ""
        failed = f", **{b.status}**: {b.failure}" if b.status is not Status.PASSED else ""
        return f"{b.side} {b.block} ({reps}{ready}, {checks}{failed})"

    lines = [
        f"- Blocks of {series.step} (each side launched afresh per block, {series.launches} added launches): "
        + markdown_text(", ".join(block(b) for b in series.blocks), 800)
    ]
    drifted = drift_lines(series)
    lines += [f"- ⚠️ {markdown_text(line)}" for line in drifted]
    if not drifted and series.block_effects:
        lines.append("- Block effect: each side's blocks agree within their repetitions' noise")
    return lines


def performance_sections(results: RunResults, plots: Mapping[str, str]) -> list[AnnotationPart]:
    """One section per comparison that measured performance, with its plot."""
    return [
        AnnotationPart(
            _performance(results, comparison_id, comparison, section, plots.get(comparison_id)),
            title=f"Performance {comparison_id}",
        )
        for comparison_id, comparison in results.comparisons.items()
        if (section := comparison.section(SECTION)) is not None
    ]


def _can_see_cell(metric: MetricComparison) -> str:
    """The metric's smallest detectable change, ❌ where it is wider than the profile's ``detect_pct``."""
    if metric.detectable_pct is None:
        return formatting.MISSING
    mark = "❌ " if metric.undetectable else ""
    asked = f" (asked ±{metric.detect_pct:g}%)" if metric.detect_pct is not None else ""
    return f"{mark}±{metric.detectable_pct:.1f}%{asked}"


def _performance(
    results: RunResults,
    comparison_id: str,
    comparison: Comparison,
    performance: PerformanceComparison,
    plot: str | None,
) -> str:
    baseline = markdown_text(comparison.baseline_label)
    candidate = markdown_text(comparison.candidate_label)
    lines = [f"### Performance: {candidate} vs {baseline} (<code>{markdown_text(comparison_id)}</code>)", ""]
    if performance.control:
        lines += ["> **Control run** (forced routing changes outputs): not headline performance evidence.", ""]
    if performance.shapes:  # one case under several shapes: this table is workloads.bench's own
        lines += [f"#### Shape <code>workloads.bench</code>{_shape_said(results, comparison, '')}", ""]
    lines += _performance_body(results, comparison, performance, "")
    for name, shaped in performance.shapes.items():
        lines += ["", f"#### Shape <code>{markdown_text(name)}</code>{_shape_said(results, comparison, name)}", ""]
        lines += _performance_body(results, comparison, shaped, name)
    if plot:
        lines += ["", f'<img src="artifact://{quote(plot, safe="/._-")}" alt="{candidate} vs {baseline}">']
    return "\n".join(lines) + "\n"


def _shape_said(results: RunResults, comparison: Comparison, shape: str) -> str:
    """A shape's load in words ("": ``workloads.bench``'s own), from the first repetition either side ran of it
    ('' where none ran)."""
    sides: list[CasePerformance | None] = [
        case.section(SECTION) for case in map(results.case, (comparison.baseline, comparison.candidate)) if case
    ]
    sections = [side.shapes.get(shape) if shape else side for side in sides if side]
    argv = next((rep.argv for section in sections if section for rep in section.repetitions if rep.argv), [])
    said = shape_words(argv)
    return f": {markdown_text(said)}" if said else ""


def _performance_body(
    results: RunResults, comparison: Comparison, performance: PerformanceComparison, shape: str
) -> list[str]:
    """One shape's table, notes, warnings, gate and each side's repetitions ("": ``workloads.bench``'s own)."""
    baseline = markdown_text(comparison.baseline_label)
    candidate = markdown_text(comparison.candidate_label)
    lines: list[str] = []
    metrics = performance.metrics
    if metrics:
        lines += [
            f"| Metric | {baseline} | {candidate} | Delta | Interval vs margin | Verdict | Can see | Reps | Noise |",
            "| --- | ---: | ---: | ---: | --- | --- | ---: | ---: | --- |",
        ]
        for metric in metrics:
            unit = markdown_text(metric.unit)
            verdict = _metric_verdict(metric, control=performance.control)
            lines.append(
                f"| {markdown_text(metric.name)} "
                f"| {formatting.measure(metric.baseline.mean, metric.baseline.std, unit)} "
                f"| {formatting.measure(metric.candidate.mean, metric.candidate.std, unit)} "
                f"| {formatting.percent(metric.delta_pct)} | {_against_margin(metric)} | {verdict} "
                f"| {_can_see_cell(metric)} "
                f"| {len(metric.baseline.values)}+{len(metric.candidate.values)} | {_noise(metric)} |"
            )
        lines += [""]
        lines += (
            []
            if shape
            else [
                "Mean ± sample standard deviation over the formal repetitions; the delta is the candidate's relative to "
                "the baseline's mean. Interval: the delta's 90% equivalence interval (two one-sided tests; split over a "
                "series' looks) against the ±margin, drawn from -2 to +2 margins (<code>¦</code> the margins, "
                "<code>0</code> zero): parity when it lies between the margins, better/worse when the 95% interval "
                "excludes 0 and the delta passes the threshold, inconclusive otherwise. Can see: the smallest change "
                "these repetitions would call different 80% of the time at this noise (never under the threshold); "
                "❌ where the profile asks to see a smaller one (<code>detect_pct</code>).",
                "",
            ]
        )
        lines += [
            f"- {markdown_text(m.name)} inconclusive: {markdown_text(m.reason)}"
            for m in metrics
            if m.verdict is Verdict.INCONCLUSIVE and m.reason
        ]
        lines += [f"- {markdown_text(undetectable_line(m))}" for m in metrics if m.gated and m.undetectable]
        lines += _series_lines(performance.sequential)
        lines += [""] if lines[-1] else []
    for warning in performance.warnings:
        lines += [f"⚠️ Performance warning: {markdown_text(warning)} (<code>on_worse: warn</code>)", ""]
    for side in performance.saturated:
        lines += [f"⚠️ Compared in saturation: {markdown_text(side, 500)}", ""]
    failure = markdown_text(performance.failure or "", 300)
    if not metrics:
        lines += [f"No metrics: {status_cell(performance.status, failure)}", ""]
    elif performance.status is not Status.PASSED:
        lines += [f"Performance gate: {status_cell(performance.status, failure)}", ""]
    for side, label in ((comparison.baseline, baseline), (comparison.candidate, candidate)):
        case = results.case(side)
        section = case.section(SECTION) if case else None
        lines.append(_repetitions_line(label, section.shapes.get(shape) if section and shape else section))
    return lines


# ---- plot ---------------------------------------------------------------------------------------------------------


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
    performance: PerformanceComparison | None = comparison.section(SECTION)
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


def write_performance_plots(results: RunResults, plots_dir: Path) -> dict[str, Path]:
    """Write one PNG per comparison with metrics; comparison id -> path."""
    figures = (
        (comparison_id, plot_comparison(comparison_id, comparison, smoke_only=results.smoke_only))
        for comparison_id, comparison in results.comparisons.items()
    )
    return write_pngs(figures, plots_dir)
