"""Side files of results.json: bulky per-request records (each with its top-k logprobs) kept beside it, one typed
record a JSON line, referenced from results.json by their path relative to the results folder (a phase's folder,
one file per case: ``<folder>/<case>.jsonl``). results.json stays small enough to read and upload; these are read
back only where every request is needed (a comparison)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from afd_e2e.errors import UsageError
from afd_e2e.results.codec import FormatError, from_json, to_json

T = TypeVar("T")


def write_records(path: Path, records: Sequence[Any]) -> None:
    """Every record as a JSON line, replacing the file at once (readers never see half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps(to_json(r), ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    os.replace(tmp, path)


def read_records(out_dir: Path, relative: str, record_type: type[T]) -> list[T]:
    """The records of ``out_dir/relative``; a missing or malformed file is a UsageError naming it and the line."""
    path = out_dir / relative
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        return [from_json(record_type, json.loads(line), f"{relative}:{n}") for n, line in enumerate(lines, 1)]
    except FormatError as exc:
        raise UsageError(f"{path} does not fit its record: at {exc.path}: {exc.problem}", "re-run the case") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}", "copy the whole results folder, side files included") from exc
