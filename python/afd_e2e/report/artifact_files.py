"""Which files of a results folder are artifacts: uploaded to Buildkite and linked from the annotation.

Globs are relative to the results folder; uploads run from inside it, so an artifact's Buildkite path is its path
in the folder (``plots/performance.png``) and ``artifact://`` links in the annotation resolve to it.
"""

from __future__ import annotations

from pathlib import Path

from afd_e2e.errors import UsageError
from afd_e2e.report import section_renderers
from afd_e2e.results.store import load_results

ARTIFACT_GLOBS = (
    "results.json",
    "run-record.json",
    "annotation*.md",
    "junit/*.xml",
    "plots/*.png",
    "trend/*",
    "logs/**/*",
    "gsm8k/*.jsonl",
    "parity/*.jsonl",
    "replay/*.jsonl",
    "bench/**/*.json",
    "bench/**/*.log",
    "forensics/**/*",
)


def section_artifacts(out_dir: Path) -> list[str]:
    """The files the registered renderers name for upload, case by case, that still exist: what no glob can choose
    (files picked by what the run recorded, such as traces within an upload cap)."""
    try:
        cases = load_results(out_dir).cases.values()
    except UsageError:
        return []
    reports = section_renderers.section_reports()
    chosen = [path for case in cases for report in reports if report.artifacts for path in report.artifacts(case)]
    return [path for path in chosen if (out_dir / path).is_file()]


def matching_globs(out_dir: Path) -> list[str]:
    """The globs that match at least one file (an upload of a glob matching nothing is an agent error), then the
    files the sections name for upload, each by its path."""
    globs = [pattern for pattern in ARTIFACT_GLOBS if any(p.is_file() for p in out_dir.glob(pattern))]
    return globs + section_artifacts(out_dir)


def list_artifacts(out_dir: Path) -> list[str]:
    """Every artifact file, relative to ``out_dir``, in glob order (annotations excluded: they link themselves)."""
    files: list[str] = []
    for pattern in ARTIFACT_GLOBS:
        if pattern.startswith("annotation"):
            continue
        files += sorted(str(p.relative_to(out_dir)) for p in out_dir.glob(pattern) if p.is_file())
    return files + section_artifacts(out_dir)
