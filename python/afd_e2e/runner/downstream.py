"""Parts of a run that other packages of the project provide, imported only when a run needs them."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace

from afd_e2e.workloads.context import PhaseContext


def workload_phases() -> ModuleType | SimpleNamespace:
    """``afd_e2e.workloads.phases``; until that module lands, stand-ins that record its phases as skipped."""
    try:
        return importlib.import_module("afd_e2e.workloads.phases")
    except ModuleNotFoundError as exc:
        if exc.name != "afd_e2e.workloads.phases":
            raise
    skipped = {"status": "skipped", "failure": "workloads not installed"}

    def phase(section: str) -> Callable[[PhaseContext], dict]:
        def run(ctx: PhaseContext) -> dict:
            ctx.case_results[section] = dict(skipped)
            return dict(skipped)

        return run

    return SimpleNamespace(
        run_correctness=phase("gsm8k"), run_performance=phase("performance"), compare=lambda _profile, _data: {}
    )


def render_reports(out_dir: Path) -> str | None:
    """Render JUnit, annotation and plots from ``out_dir/results.json``; return why not, or None when rendered."""
    try:
        render = importlib.import_module("afd_e2e.report.render")
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("afd_e2e.report"):
            raise
        return "afd_e2e.report is not installed"
    render.render_all(out_dir)
    return None
