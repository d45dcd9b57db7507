"""What the runner hands a workload phase: the contract between ``afd_e2e.runner`` and ``afd_e2e.workloads``.

``afd_e2e.workloads.phases`` provides ``run_correctness(ctx) -> dict`` and ``run_performance(ctx) -> dict``, each
returning the phase's outcome ``{"status": "passed"|"failed"|..., "failure": None | "one line"}``, and
``compare(profile, results_data) -> dict`` (the results ``comparisons`` section).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from afd_e2e.plan.model import CasePlan
from afd_e2e.profile import Profile


@dataclass
class PhaseContext:
    profile: Profile  # afd_e2e.profile.Profile
    case: CasePlan  # afd_e2e.plan.model.CasePlan
    case_results: (
        dict  # results["cases"][case.id]; the phase writes its sections into it (gsm8k, parity_outputs, performance)
    )
    out_dir: Path  # the run's results folder
    progress: Callable[[str], None]  # prints a progress line (the runner's steady progress printer)
    cancelled: threading.Event  # set on SIGTERM/SIGINT; long phases must stop promptly when set
    flush: Callable[[], None]  # persist results.json now (call after each repetition)
    gsm8k_dir: Path | None  # the staged GSM8K folder from --gsm8k-dir; None: the profile's dataset env var
