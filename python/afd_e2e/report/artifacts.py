"""Which files of a results folder are artifacts: uploaded to Buildkite and linked from the annotation.

Globs are relative to the results folder; uploads run from inside it, so an artifact's Buildkite path is its path
in the folder (``plots/performance.png``) and ``artifact://`` links in the annotation resolve to it.
"""

from __future__ import annotations

from pathlib import Path

ARTIFACT_GLOBS = (
    "results.json",
    "run-record.json",
    "annotation*.md",
    "junit/*.xml",
    "plots/*.png",
    "trend/*",
    "logs/**/*",
    "gsm8k/*.jsonl",
    "bench/**/*.json",
    "bench/**/*.log",
)


def matching_globs(out_dir: Path) -> list[str]:
    """The globs that match at least one file, since an upload of a glob matching nothing is an agent error."""
    return [pattern for pattern in ARTIFACT_GLOBS if any(p.is_file() for p in out_dir.glob(pattern))]


def list_artifacts(out_dir: Path) -> list[str]:
    """Every artifact file, relative to ``out_dir``, in glob order (annotations excluded: they link themselves)."""
    files: list[str] = []
    for pattern in ARTIFACT_GLOBS:
        if pattern.startswith("annotation"):
            continue
        files += sorted(str(p.relative_to(out_dir)) for p in out_dir.glob(pattern) if p.is_file())
    return files
