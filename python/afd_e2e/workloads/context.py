"""What the runner hands a phase: the contract between ``afd_e2e.runner`` and every registered phase's run function
(``runner/dispatch.py``), which returns the phase's ``PhaseOutcome``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from afd_e2e.plan.model import CasePlan
from afd_e2e.profile import Profile
from afd_e2e.results.model import CaseResults
from afd_e2e.results.status import Status
from afd_e2e.workloads.bench import WarmClient


@dataclass(frozen=True)
class PhaseOutcome:
    """What the runner records of a phase: its worst status and, unless it passed, the first failure."""

    status: Status
    failure: str | None = None


def worst_outcome(parts: list[PhaseOutcome]) -> PhaseOutcome:
    """The outcome of a phase run in parts (the correctness phase's two halves, the performance phase's shapes): the
    worst status among them, cancelled before failed, with every failure of that status; passed where none failed."""
    for status in (Status.CANCELLED, Status.FAILED):
        failures = [s.failure or str(status) for s in parts if s.status is status]
        if failures:
            return PhaseOutcome(status, "; ".join(failures))
    return PhaseOutcome(Status.PASSED)


@dataclass
class PhaseContext:
    profile: Profile
    case: CasePlan
    case_results: CaseResults  # the phase writes its sections into it (``record``)
    out_dir: Path  # the run's results folder
    progress: Callable[[str], None]  # prints a progress line (the runner's steady progress printer)
    cancelled: threading.Event  # set on SIGTERM/SIGINT; long phases must stop promptly when set
    flush: Callable[[], None]  # persist results.json now (call after each repetition)
    gsm8k_dir: Path | None  # the staged GSM8K folder from --gsm8k-dir; None: the profile's dataset env var
    # the environment of a process the phase starts (``vllm bench serve``), by name: the agent's without
    # credentials, with the run's markers, so ``afd-e2e cleanup`` finds it (system/child_env.py)
    client_env: Callable[[str], dict[str, str]]
    # takes the case's forensics now (a trigger of afd_e2e.forensics.Trigger, the reason): a step that ran out of
    # its own budget (a bench repetition) while the engine may be hung
    take_forensics: Callable[[str, str], None]
    # what the progress watchdog sees now, for a step that ran out of its own budget: "8 requests in flight, no
    # token for 150 s; ffn EngineCore_DP0 pid 12 is stopped" ('' without telemetry)
    diagnose: Callable[[], str] = lambda: ""
    # the case's telemetry samples so far, as its telemetry file has them (``telemetry/sampler.py`` sample_json):
    # what a phase judges of its own stretch of the timeline (the soak's memory growth); [] without telemetry
    timeline: Callable[[], list[dict[str, Any]]] = lambda: []
    # the case's warm ``vllm bench serve`` client, shared by every phase of the case that benches (started with its
    # servers, closed at its teardown: ``CaseServers.bench_client``); None where the executable is not vLLM's own
    # CLI, or the case has no phase that benches: each command is then a process of its own
    bench_client: WarmClient | None = None

    def record(self, name: str, section: Any) -> None:
        """The case's section ``name`` set to ``section`` and results.json written now, so what the phase has
        measured so far is kept if a crash, a timeout or a cancel ends it later."""
        self.case_results.set_section(name, section)
        self.flush()
