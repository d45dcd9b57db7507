"""Where earlier runs come from, behind one interface, and which of them may be compared with tonight.

A source yields ``Fetched`` runs (a results document, or the reason there is none) newest first; ``screen`` keeps
those of tonight's identity and names why each other one was skipped: no results, another schema, a cancelled
run, tonight's own run (its ``run_id``, copied into the history), another profile, profile revision or hardware. Two sources: ``FolderHistory`` (``--history DIR``, one
sub-folder per run) here, ``BuildkiteHistory`` (earlier builds of this pipeline) in ``trend.buildkite_history``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from afd_e2e.errors import UsageError
from afd_e2e.results import RESULTS_FILE, SCHEMA, RunResults, Status
from afd_e2e.results.store import results_from_json
from afd_e2e.trend.record import BuildRef, Identity, RunPoint, run_point


@dataclass(frozen=True)
class Fetched:
    """One earlier run as a source found it: its results document, or why it has none (``skip``)."""

    build: BuildRef
    results: RunResults | None
    skip: str | None = None
    skip_kind: str = "no results"


def parsed(build: BuildRef, data: Any, source: str) -> Fetched:
    """A fetched results document read through the results model; another schema or shape is a skip."""
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema != SCHEMA:
        return Fetched(build, None, f"schema {schema!r}, this afd-e2e reads {SCHEMA}", "schema")
    try:
        results = results_from_json(data, source)
    except UsageError as exc:
        return Fetched(build, None, exc.problem, "unreadable")
    return Fetched(build_ref(results, build), results)


@dataclass(frozen=True)
class Skipped:
    build: BuildRef
    reason: str
    kind: (
        str  # counted in the section: no results, schema, cancelled, tonight's run, other profile / revision / hardware
    )


class HistorySource(Protocol):
    description: str  # e.g. "builds of acme/vllm on main", "folder /data/history"

    def fetch(self, limit: int) -> list[Fetched]:
        """Up to ``limit`` candidate runs (more when some will be skipped), newest first."""
        ...


def build_ref(results: RunResults, known: BuildRef) -> BuildRef:
    """The build the results' own build record names, else what the source knows (a folder name, Buildkite's
    build object), completed from each other."""
    build = results.build
    if build is None or build.build_number is None:
        return dataclasses.replace(known, created_at=known.created_at or results.started_at)
    return BuildRef(
        label=f"#{build.build_number}",
        number=build.build_number,
        url=build.build_url or known.url,
        commit=build.commit or known.commit,
        created_at=known.created_at or results.started_at,
    )


class FolderHistory:
    """``DIR/<run>/results.json``, for users outside Buildkite and for tests; ordered by build number, else start."""

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise UsageError(f"history folder {root} does not exist", "pass a folder holding one sub-folder per run")
        self.root = root
        self.description = f"folder {root}"

    def fetch(self, limit: int) -> list[Fetched]:
        """Newest first: by build number (the results' own, else the folder name's digits), then start time."""
        fetched = [self._read(folder) for folder in self.root.iterdir() if folder.is_dir()]
        fetched.sort(key=lambda f: (f.build.number or -1, f.build.created_at or "", f.build.label), reverse=True)
        return fetched[: limit * 2]

    @staticmethod
    def _read(folder: Path) -> Fetched:
        digits = re.search(r"(\d+)$", folder.name)
        by_name = BuildRef(folder.name, int(digits.group(1)) if digits else None)
        path = folder / RESULTS_FILE
        if not path.is_file():
            return Fetched(by_name, None, f"no {RESULTS_FILE}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return Fetched(by_name, None, f"{RESULTS_FILE} is not readable JSON ({type(exc).__name__})", "unreadable")
        return parsed(by_name, data, str(path))


@dataclass(frozen=True)
class Screened:
    points: list[RunPoint]  # comparable runs, oldest first, at most the window
    skipped: list[Skipped]


def screen(fetched: list[Fetched], tonight: Identity, window: int, tonight_run_id: str | None = None) -> Screened:
    """Keep the newest ``window`` runs of tonight's identity (returned oldest first); name why the rest were skipped.
    A run with tonight's ``run_id`` is tonight's own results (a copy in the history folder): comparing a run with
    itself would make tonight's move a two-night change."""
    points: list[RunPoint] = []
    skipped: list[Skipped] = []
    for run in fetched:
        if len(points) == window:
            break
        reason = _skip_reason(run, tonight_run_id)
        if reason is None:
            assert run.results is not None
            point = run_point(run.results, run.build)
            differences = point.identity.differences(tonight)
            if not differences:
                points.append(point)
                continue
            reason = (_identity_kind(point.identity, tonight), "; ".join(differences))
        skipped.append(Skipped(run.build, reason[1], reason[0]))
    return Screened(points[::-1], skipped)


def _identity_kind(theirs: Identity, tonight: Identity) -> str:
    """The category of the first difference: another profile, profile revision or hardware."""
    if theirs.profile != tonight.profile:
        return "other profile"
    return "other profile revision" if theirs.revision != tonight.revision else "other hardware"


def _skip_reason(run: Fetched, tonight_run_id: str | None) -> tuple[str, str] | None:
    if run.results is None:
        return (run.skip_kind, run.skip or "no results")
    if tonight_run_id is not None and run.results.run_id == tonight_run_id:
        return (
            "tonight's run",
            f"tonight's own results (run_id {tonight_run_id}): a run is never compared with itself",
        )
    if run.results.status is Status.CANCELLED:
        return ("cancelled", "the run was cancelled")
    if run.results.status.unfinished:
        return ("cancelled", f"the run never finished (status {run.results.status})")
    return None
