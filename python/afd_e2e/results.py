"""results.json: the one record of a run, written incrementally so a crash or cancel leaves a valid file.

Everything downstream (JUnit, annotation, plots, Buildkite upload) renders from this file alone, so a results
folder copied from another machine renders the same. Layout (schema ``afd-e2e/results/v1``)::

    {"schema", "profile", "platform", "smoke_only", "status", "started_at", "finished_at",
     "plan": RunPlan.to_dict(), "environment": {...}, "preflight": {"status", "checks": [...]} | null,
     "cases": {case_id: {"id", "label", "kind", "status", "failure", "timings": {...}, "processes": [...],
                         "smoke": {...}, "gsm8k": {...}, "parity_outputs": [...], "performance": {...},
                         "hygiene": [{"check", "status", "detail"}], "log_tail"}},
     "comparisons": {cmp_id: {"baseline", "candidate", "parity": {...}, "performance": {...}}},
     "verdict": {"status", "reasons": [...]}}

Status words: run/case ``running|passed|failed|cancelled|crashed|skipped``; checks ``pass|fail|warn|skip|n/a``.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from afd_e2e.errors import UsageError

SCHEMA = "afd-e2e/results/v1"
RESULTS_FILE = "results.json"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_json_atomic(path: Path, data: Any) -> None:
    """Write via a temp file and rename, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=False, default=str)
        handle.write("\n")
    os.replace(tmp, path)


class ResultsStore:
    """Holds the results document in memory and flushes it to ``out_dir/results.json`` on every change."""

    def __init__(self, out_dir: Path, data: dict[str, Any]) -> None:
        self.out_dir = out_dir
        self.path = out_dir / RESULTS_FILE
        self.data = data
        self.flush()

    @classmethod
    def start(
        cls, out_dir: Path, *, profile: str, platform: str, smoke_only: bool, plan: dict[str, Any]
    ) -> ResultsStore:
        return cls(
            out_dir,
            {
                "schema": SCHEMA,
                "profile": profile,
                "platform": platform,
                "smoke_only": smoke_only,
                "status": "running",
                "started_at": now_iso(),
                "finished_at": None,
                "plan": plan,
                "environment": {},
                "preflight": None,
                "cases": {},
                "comparisons": {},
                "verdict": {"status": "running", "reasons": []},
            },
        )

    def flush(self) -> None:
        write_json_atomic(self.path, self.data)

    def case(self, case_id: str) -> dict[str, Any]:
        return self.data["cases"].setdefault(case_id, {"id": case_id, "status": "running"})

    def update(self, section: str, key: str | None, value: Any) -> None:
        """Set ``data[section][key] = value`` (or ``data[section] = value``) and flush."""
        if key is None:
            self.data[section] = value
        else:
            self.data.setdefault(section, {})[key] = value
        self.flush()


def load_results(out_dir: Path) -> dict[str, Any]:
    path = out_dir / RESULTS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise UsageError(f"{path} does not exist", "pass the --out folder of an `afd-e2e run`") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path} is not readable JSON: {exc}", "re-run or restore the file") from exc
    if data.get("schema") != SCHEMA:
        raise UsageError(
            f"{path} has schema {data.get('schema')!r}, expected {SCHEMA}", "render it with a matching afd-e2e"
        )
    return data
