"""The records of ``bisect.json`` (schema ``afd-e2e/bisect/v1``): what ``afd-e2e bisect`` probed and found, typed.

Written after every probe, so a cancelled search keeps what it measured (``--resume`` continues from it); read back
checked, as results.json is; its JSON Schema is generated from these records (``afd-e2e schema bisect``) and
shipped as ``bisect_schema.json``. ``first_bad`` is a full sha or null; ``range`` holds the commits the first bad
one is among when skipped commits hid the answer. Paths are relative to the bisect's folder or absolute (the sample
cache may lie elsewhere).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from afd_e2e.errors import UsageError
from afd_e2e.results.codec import FormatError, from_json, to_json
from afd_e2e.results.schema import document_schema, schema_json
from afd_e2e.results.status import BisectWord, Status, Verdict
from afd_e2e.results.store import write_json_atomic

BISECT_SCHEMA = "afd-e2e/bisect/v1"
BISECT_FILE = "bisect.json"
SCHEMA_FILE = Path(__file__).with_name("bisect_schema.json")


@dataclass
class CommitRef:
    """One commit of the first-parent list from the good revision to the bad one, oldest first."""

    sha: str  # the full sha
    subject: str


@dataclass
class ProbeRun:
    """One run of the case at a commit: one server, the case's phases, its results.json (``results``)."""

    run: int  # 1-based, per commit
    status: Status  # the run's own status (passed, failed, crashed, ...)
    seconds: float  # wall time of the run (the install is the probe's)
    values: list[float] = field(default_factory=list)  # the metric's values this run measured
    results: str = ""  # the run's results.json
    failure: str | None = None
    cached: bool = False  # taken from the sample cache: measured by an earlier search, nothing launched
    added: str = ""  # an endpoint's run added while another commit was undecided: for which, and why


@dataclass
class Probe:
    """One commit judged: its word, why, the values of all its runs, and for a bench metric: the bad revision's
    verdict against the good one (delta, intervals), a commit between them its position (0 good, 1 bad) with its
    interval and its delta from the good revision; the wall time spent on it (an endpoint's: with runs added later)."""

    commit: str
    subject: str
    index: int  # position in ``commits``: 0 is the good revision, the last the bad one
    word: BisectWord
    reason: str
    seconds: float  # install and runs, measured now (0 when every run came from the cache)
    install_s: float = 0.0
    verdict: Verdict | None = None  # the bad revision's verdict against the good revision's values
    delta_pct: float | None = None
    ci95_pct: list[float] | None = None
    ci90_pct: list[float] | None = None
    values: list[float] = field(default_factory=list)
    runs: list[ProbeRun] = field(default_factory=list)
    position: float | None = None  # a commit between the endpoints: where it lies, 0 good, 1 bad
    position_ci90: list[float] | None = None


@dataclass
class BisectRange:
    """Where the first bad commit is when skipped commits hide it: one of ``commits`` (oldest first), the last of
    which is the first commit known bad."""

    first: str
    last: str
    commits: list[str] = field(default_factory=list)


@dataclass
class BisectRecord:
    """A whole search. ``status``: running, passed (a first bad commit found), failed (a range, or the endpoints do
    not reproduce: ``conclusion`` says which), cancelled (SIGINT/SIGTERM; ``--resume`` continues) or crashed."""

    schema: str
    profile: str
    case: str
    metric: str
    repo: str
    good: str  # the revisions as given, resolved in ``commits``
    bad: str
    status: Status
    started_at: str
    commits: list[CommitRef] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)  # in the order probed
    first_bad: str | None = None
    range: BisectRange | None = None
    conclusion: str = ""
    finished_at: str | None = None
    seconds: float = 0.0  # wall time of this search (a resumed one: of all its sessions)
    launches: int = 0  # case runs launched (servers started), not counting those taken from the cache
    cache: str = ""  # the sample and package cache
    plot: str | None = None  # bisect.png
    hunted_pct: float | None = None  # --regression-pct: the size of the move hunted (the trend's episode's)
    log: str = "bisect.log"  # ``git bisect replay``-able


def bisect_schema() -> dict[str, Any]:
    return document_schema(BisectRecord, BISECT_SCHEMA, "afd-e2e bisect.json")


def bisect_schema_text() -> str:
    return schema_json(bisect_schema())


def write_bisect(out_dir: Path, record: BisectRecord) -> Path:
    path = out_dir / BISECT_FILE
    write_json_atomic(path, to_json(record))
    return path


def load_bisect(out_dir: Path) -> BisectRecord:
    """The checked record in ``out_dir``; a missing, foreign or damaged file is a one-line UsageError."""
    path = out_dir / BISECT_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise UsageError(f"{path} does not exist", "pass the --out folder of an `afd-e2e bisect`") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path} is not readable JSON ({exc})", "start the bisect again without --resume") from None
    if not isinstance(data, dict) or data.get("schema") != BISECT_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise UsageError(f"{path} has schema {found!r}, this afd-e2e reads {BISECT_SCHEMA}", "use another --out")
    try:
        return from_json(BisectRecord, data)
    except FormatError as exc:
        raise UsageError(
            f"{path} does not fit schema {BISECT_SCHEMA}: at {exc.path}: {exc.problem}",
            "restore the file or start again without --resume (`afd-e2e schema bisect` prints the schema)",
        ) from None


if __name__ == "__main__":  # python -m afd_e2e.results.bisect_records > python/afd_e2e/results/bisect_schema.json
    print(bisect_schema_text(), end="")
