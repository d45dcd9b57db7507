"""results.json: the one record of a run, written incrementally so a crash or cancel leaves a valid file.

Everything downstream (JUnit, annotation, plots, Buildkite upload) renders from this file alone, so a results
folder copied from another machine renders the same. This docstring is the schema contract (``afd-e2e/results/v1``);
paths inside are relative to the results folder. Status words: run/case/phase ``running|passed|failed|cancelled|
crashed|skipped``; checks ``pass|fail|warn|skip|n/a``; metric verdicts ``better|worse|parity``.

    schema, profile, platform ("cuda"|"cpu"), smoke_only (bool), status, started_at, finished_at (ISO 8601 UTC)
    plan:        RunPlan.to_dict()
    environment: {hostname, python, vllm, torch, driver, cuda, gpus: [{index, name, memory_total_mib}],
                  topology: "one-line summary", checkpoint: {path, architectures, model_type, size_gib}}
    preflight:   null | {status: "pass"|"fail", checks: [{name, status, measured, wanted, fix}]}
    cases: {case_id: {
        id, label, kind, status, failure: null | "one line",
        timings: {launch_to_ready_s, teardown_s, wall_s, phases: {phase: seconds}},
        processes: [{name, pid, argv, exit_code, forced_kill (bool), log: "logs/<case>/<name>.log"}],
        log_tail: null | "last lines of the failing process's log",
        smoke: {status, prompt, completion, completion_tokens, latency_s, failure},
        gsm8k: {status, correct, total, min_correct, accuracy_meaningful, flexible_correct,
                records: "gsm8k/<case>.jsonl", failure,
                questions: [{index, prompt_sha256, extracted, flexible, gold, correct (bool)}]},
        parity_outputs: [{prompt, text, token_ids: [int], error: null | "one line"}],
        performance: {status, failure, warmups: [rep], repetitions: [rep]} where
            rep = {index, status, failure, path: "bench/<case>/rep-N.json" (warmup-N.json), log: "bench/<case>/rep-N.log",
                   completed, failed, num_prompts, duration_s, metrics: {metric_key: value}},
        hygiene: [{check: "processes"|"ports"|"gpu_memory"|"forced_kill"|"leftover_files", status, detail}]}}
    comparisons: {comparison_id: {
        baseline, candidate, baseline_label, candidate_label,
        parity: {status, failure, identical, total, share, min_share,
                 prompts: [{prompt, identical (bool), first_diff_token: null | int}]},
        performance: {status, failure, control (bool), metrics: [{
            key, name, unit, higher_is_better (bool),
            baseline: {mean, std, values: [...]}, candidate: {mean, std, values: [...]},
            delta_pct, ci95_pct: [low, high] | null, verdict}]}}}
    verdict: {status, reasons: ["one line each"]}

Metric keys are ``vllm bench serve`` result keys: request_throughput, output_throughput, mean_ttft_ms,
mean_tpot_ms, mean_itl_ms, mean_e2el_ms and p99_* where present. A comparison's parity/performance status is
``passed|failed|skipped`` (skipped: a side recorded nothing; failure says which). ``plan.cases[].control`` and
``plan.comparisons[].control`` mark the forced-routing control, which never enters the verdict.
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
        self.lock = threading.RLock()  # held by every writer of ``data`` from another thread, and by flush
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
        """Save a consistent snapshot: no thread writing through the lock can change ``data`` mid-dump."""
        with self.lock:
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
