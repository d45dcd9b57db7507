"""``afd-e2e trend`` writes ``trend/`` beside ``results.json``: ``trend.json`` (every call and skip, for machines),
``annotation.md`` (the section), ``junit.xml`` and one PNG per comparison; ``report.trend_attach`` picks them up."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from afd_e2e.errors import UsageError
from afd_e2e.report.trend_attach import JUNIT_FILE, SECTION_FILE, SUMMARY_FILE, TREND_DIR
from afd_e2e.results import write_json_atomic
from afd_e2e.results.codec import from_json
from afd_e2e.trend.compute import TrendReport
from afd_e2e.trend.episodes import Episode
from afd_e2e.trend.plot import write_trend_plots
from afd_e2e.trend.section import render_section
from afd_e2e.trend.trend_junit import write_trend_junit


@dataclass(frozen=True)
class TrendFiles:
    summary: Path
    section: Path
    junit: Path
    plots: tuple[Path, ...]


def _style(report: TrendReport) -> str:
    if report.nothing_judged:
        return "info"  # not a pass: nothing was compared
    if not report.regressions:
        return "success"
    return "error" if report.fails else "warning"


def summary(report: TrendReport) -> dict:
    """trend.json: the report as plain data (calls, skips, the compared builds)."""
    data = dataclasses.asdict(report)
    data["history"] = [dataclasses.asdict(point.build) for point in report.history]
    data["tonight"] = dataclasses.asdict(report.tonight.build)
    data["regressions"] = len(report.regressions)
    data["opened_tonight"] = [dataclasses.asdict(e) for e in report.opened_tonight]  # what a bisect is offered for
    data["style"] = _style(report)
    return data


def write_trend(report: TrendReport, out_dir: Path) -> TrendFiles:
    trend_dir = out_dir / TREND_DIR
    plots = write_trend_plots(report, trend_dir)
    section = render_section(report, {cid: str(path.relative_to(out_dir)) for cid, path in plots.items()})
    section_path = trend_dir / SECTION_FILE
    section_path.write_text(section, encoding="utf-8")
    summary_path = trend_dir / SUMMARY_FILE
    write_json_atomic(summary_path, summary(report))
    junit = write_trend_junit(report, trend_dir / JUNIT_FILE)
    return TrendFiles(summary_path, section_path, junit, tuple(plots.values()))


def read_opened_tonight(out_dir: Path) -> list[Episode]:
    """The episodes the trend of the run in ``out_dir`` opened tonight (``trend/trend.json``), checked."""
    path = out_dir / TREND_DIR / SUMMARY_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return from_json(list[Episode], data.get("opened_tonight", []), "opened_tonight")
    except FileNotFoundError:
        raise UsageError(
            f"{path} does not exist", "run the trend first (afd-e2e report with AFD_E2E_TREND set)"
        ) from None
    except (OSError, ValueError, AttributeError) as exc:
        raise UsageError(f"{path} is not a trend summary ({exc})", "re-run the trend") from None
