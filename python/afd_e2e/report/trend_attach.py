"""How the report picks the trend up: ``attach`` is the report's one call. It appends the section that
``afd-e2e trend`` wrote to the annotation (a warning at least when something regressed, an error when the profile
fails on it) and adds the trend's JUnit file, so re-rendering the report keeps the trend. It lives in the report
layer, below ``afd_e2e.trend``, which writes these files (``trend/files.py``) and imports their names from here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

TREND_DIR = "trend"
SUMMARY_FILE = "trend.json"
SECTION_FILE = "annotation.md"
JUNIT_FILE = "junit.xml"
MAX_SECTION_BYTES = 256 * 1024
_STYLE_ORDER = ("success", "info", "warning", "error")


@dataclass(frozen=True)
class Attached:
    body: str
    style: str
    junit: tuple[Path, ...]


def attach(out_dir: Path, body: str, style: str, *, max_bytes: int) -> Attached:
    """The annotation ``body``/``style`` with the trend section added, when ``afd-e2e trend`` wrote one."""
    trend_dir = out_dir / TREND_DIR
    section_path, summary_path = trend_dir / SECTION_FILE, trend_dir / SUMMARY_FILE
    if not (section_path.is_file() and summary_path.is_file()):
        return Attached(body, style, ())
    section = section_path.read_text(encoding="utf-8")
    try:
        trend_style = json.loads(summary_path.read_text(encoding="utf-8")).get("style", "warning")
    except (OSError, ValueError, AttributeError):
        trend_style = "warning"
    if len(section.encode()) > MAX_SECTION_BYTES or len((body + section).encode()) + 2 > max_bytes:
        section = f"### Trend\n\nThe trend section is too large for the annotation: see {TREND_DIR}/{SECTION_FILE}.\n"
    worst = max(style, trend_style, key=lambda s: _STYLE_ORDER.index(s) if s in _STYLE_ORDER else 2)
    junit = (trend_dir / JUNIT_FILE,) if (trend_dir / JUNIT_FILE).is_file() else ()
    return Attached(body.rstrip("\n") + "\n\n" + section, worst, junit)
