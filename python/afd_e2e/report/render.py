"""``render_all``: every report file from ``DIR/results.json``, written beside it.

The runner calls it at the end of a run and after a crash or cancel, so it renders whatever exists: cases still
"running", sections missing, no comparisons. Re-rendering replaces the earlier files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from afd_e2e.report import section_renderers
from afd_e2e.report.annotation import FULL_REPORT_FILE, MAX_BYTES, render_annotation
from afd_e2e.report.artifact_files import list_artifacts
from afd_e2e.report.junit import write_junit
from afd_e2e.report.plots import remove_pngs
from afd_e2e.report.trend_attach import attach as attach_trend
from afd_e2e.results import load_results
from afd_e2e.results.status import Status

ANNOTATION_FILE = "annotation.md"


@dataclass(frozen=True)
class ReportPaths:
    out_dir: Path
    annotation: Path  # the body for `buildkite-agent annotate` (at most 1 MiB)
    annotation_full: Path | None  # the complete annotation, when annotation.md had to be a summary
    junit: tuple[Path, ...]
    plots: tuple[Path, ...]
    annotation_style: str
    profile: str  # with the job's step, the annotation's context (report.annotation.annotation_context)
    verdict: Status  # the run's verdict, or its status when it did not reach one: for the build's summary


def render_all(out_dir: Path) -> ReportPaths:
    results = load_results(out_dir)
    plots_dir = out_dir / "plots"
    remove_pngs(plots_dir)
    plots: dict[str, Path] = {}
    for report in section_renderers.section_reports():
        if report.plots:
            plots.update(report.plots(results, out_dir, plots_dir))
    junit = write_junit(results, out_dir / "junit")
    annotation = render_annotation(
        results,
        plots={comparison_id: str(path.relative_to(out_dir)) for comparison_id, path in plots.items()},
        artifacts=list_artifacts(out_dir),
    )
    annotation_path = out_dir / ANNOTATION_FILE
    full_path = out_dir / FULL_REPORT_FILE
    trend = attach_trend(out_dir, annotation.body, annotation.style, max_bytes=MAX_BYTES)
    annotation_path.write_text(trend.body, encoding="utf-8")
    if annotation.full_body is not None:
        full_path.write_text(annotation.full_body, encoding="utf-8")
    else:
        full_path.unlink(missing_ok=True)
    return ReportPaths(
        out_dir=out_dir,
        annotation=annotation_path,
        annotation_full=full_path if annotation.full_body is not None else None,
        junit=junit + trend.junit,
        plots=tuple(plots.values()),
        annotation_style=trend.style,
        profile=results.profile,
        verdict=results.status if results.partial else results.verdict.status,
    )
