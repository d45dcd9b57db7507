"""Reading and writing ``results.json``: written atomically after every change, read back checked.

``load_results`` is the only reader: a file from another version, of another shape, truncated or with a value of
the wrong type is a one-line ``UsageError`` naming the JSON path, never a traceback in a report.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from afd_e2e.errors import UsageError
from afd_e2e.plan.model import RunPlan
from afd_e2e.results.codec import FormatError, from_json, to_json
from afd_e2e.results.model import SCHEMA, RunResults
from afd_e2e.results.status import Status

RESULTS_FILE = "results.json"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_json_atomic(path: Path, data: Any) -> None:
    """Write via a temp file and rename, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=False, allow_nan=False)
        handle.write("\n")
    os.replace(tmp, path)


def results_to_json(results: RunResults) -> dict[str, Any]:
    return to_json(results)


def results_from_json(data: Any, source: str = RESULTS_FILE) -> RunResults:
    """Check parsed JSON against the model: the schema version first, then every field."""
    if not isinstance(data, dict):
        raise UsageError(
            f"{source} is not a results document: the top level is {type(data).__name__}, not an object",
            "pass the results.json an `afd-e2e run` wrote",
        )
    if data.get("schema") != SCHEMA:
        raise UsageError(
            f"{source} has schema {data.get('schema')!r}, this afd-e2e reads {SCHEMA}",
            "render it with the afd-e2e version that wrote it",
        )
    try:
        return from_json(RunResults, data)
    except FormatError as exc:
        raise UsageError(
            f"{source} does not fit schema {SCHEMA}: at {exc.path}: {exc.problem}",
            "restore the file the run wrote (`afd-e2e schema results` prints the schema)",
        ) from None


def load_results(out_dir: Path) -> RunResults:
    path = out_dir / RESULTS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise UsageError(f"{path} does not exist", "pass the --out folder of an `afd-e2e run`") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not readable: {exc}", "re-run or restore the file") from exc
    if not text.strip():
        raise UsageError(f"{path} is empty", "re-run or restore the file")
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise UsageError(f"{path} is not valid JSON ({exc})", "re-run or restore the file (truncated?)") from None
    return results_from_json(data, str(path))


class ResultsStore:
    """Holds the run's results in memory and flushes them to ``out_dir/results.json`` on every change."""

    def __init__(self, out_dir: Path, results: RunResults) -> None:
        self.out_dir = out_dir
        self.path = out_dir / RESULTS_FILE
        self.results = results
        self.lock = threading.RLock()  # held by every writer of ``results`` from another thread, and by flush
        self.flush()

    @classmethod
    def start(cls, out_dir: Path, plan: RunPlan, **fields: Any) -> ResultsStore:
        results = RunResults(
            schema=SCHEMA,
            profile=plan.profile,
            platform=plan.platform,
            smoke_only=plan.smoke_only,
            status=Status.RUNNING,
            started_at=now_iso(),
            plan=plan,
            **fields,
        )
        return cls(out_dir, results)

    def flush(self) -> None:
        """Save a consistent snapshot: no thread writing through the lock can change ``results`` mid-dump."""
        with self.lock:
            write_json_atomic(self.path, results_to_json(self.results))
