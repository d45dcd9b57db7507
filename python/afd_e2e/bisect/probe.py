"""One probe run: the case at a commit, run by the product's own runner (``execute_run``: admission, one server,
the case's phases, teardown, hygiene, results.json), with the commit's package first on the processes'
``PYTHONPATH``; and the sample cache that keeps every finished run.

The cache holds runs by profile, case and commit (``<cache>/runs/<profile>/<case>/<sha>/run-N/results.json``), not
by metric: one run measures the bench and the correctness outcome together, so a search on ``parity`` reuses the
runs a search on ``mean_tpot_ms`` made of the same commits without launching anything, and ``--resume`` replays a
cancelled search from its runs. A run that did not finish (cancelled) is removed, never reused.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from afd_e2e.bisect.verdicts import GSM8K, PARITY, MetricSpec, Sample
from afd_e2e.results.gsm8k_records import SECTION as GSM8K_SECTION
from afd_e2e.results.model import RunResults
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.results.store import RESULTS_FILE, load_results
from afd_e2e.workloads import parity
from afd_e2e.workloads.performance_comparison import passed_values


@dataclass(frozen=True)
class CachedRun:
    """A finished run of the case at a commit, as the cache holds it."""

    number: int
    folder: Path
    results: RunResults
    seconds: float


def runs_dir(cache: Path, profile: str, case_id: str, sha: str) -> Path:
    return cache / "runs" / profile / case_id / sha


def _seconds(results: RunResults) -> float:
    if not results.finished_at:
        return 0.0
    return (datetime.fromisoformat(results.finished_at) - datetime.fromisoformat(results.started_at)).total_seconds()


def cached_runs(folder: Path) -> list[CachedRun]:
    """The finished runs in ``folder`` in run order; an unfinished one (cancelled, killed) is removed."""
    runs = []
    for run in sorted(folder.glob("run-*"), key=lambda p: int(p.name.split("-")[1])):
        results = load_results(run) if (run / RESULTS_FILE).is_file() else None
        if results is None or results.status.unfinished:
            shutil.rmtree(run, ignore_errors=True)
            continue
        runs.append(CachedRun(int(run.name.split("-")[1]), run, results, _seconds(results)))
    return runs


def next_run_folder(folder: Path) -> Path:
    numbers = [int(p.name.split("-")[1]) for p in folder.glob("run-*")]
    return folder / f"run-{max(numbers, default=0) + 1}"


def sample_of(results: RunResults, out_dir: Path, case_id: str, spec: MetricSpec) -> Sample:
    """What one run measured of the metric: the case's status and failure, and the metric's evidence."""
    case = results.case(case_id)
    if case is None:
        return Sample(results.status, f"the run recorded no case {case_id}: {'; '.join(results.verdict.reasons)}")
    failure = case.failure
    if spec.key == GSM8K:
        return Sample(case.status, failure, gsm8k=case.section(GSM8K_SECTION))
    if spec.key == PARITY:
        return Sample(case.status, failure, outputs=parity.read_outputs(out_dir, case))
    performance = case.section(PERFORMANCE)
    values = passed_values(performance, spec.key) if performance else []
    return Sample(case.status, failure, values=values)


def probe_environment(base: Mapping[str, str], package: Path) -> dict[str, str]:
    """The agent's environment with the commit's package folder first on ``PYTHONPATH``."""
    rest = base.get("PYTHONPATH", "")
    return {**base, "PYTHONPATH": os.pathsep.join(p for p in (str(package), rest) if p)}
