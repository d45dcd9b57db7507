"""The runner's table of phases: each phase's run function and what the runner must know to drive it (whether a
failure ends its case, whether the progress watchdog judges stalls while it runs, what to check at admission).
Phases register from above (``afd_e2e.phases``); the case runner dispatches through it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from afd_e2e.tables import Registry

if TYPE_CHECKING:
    from afd_e2e.profile.model import Profile
    from afd_e2e.workloads.context import PhaseContext, PhaseOutcome


@dataclass(frozen=True)
class PhaseRun:
    """``check_inputs`` checks, at admission and before any model loads, what the phase will read (staged data,
    executables): a UsageError."""

    name: str
    run: Callable[[PhaseContext], PhaseOutcome]
    check_inputs: Callable[[Profile, Path | None], None] | None = None
    ends_case: bool = False  # a failure ends its case: no later phase makes sense (the server does not answer)
    # the progress watchdog judges stalls while it runs (budgets.stall_s); False for a phase that may hold a request
    # open with no token moving by design (a torch profile's stop holds its request while the traces are written)
    stall_watched: bool = True
    # it runs ``vllm bench serve``: its case's warm bench client is started with the case's servers (``CaseServers``)
    benches: bool = False


RUNS: Registry[PhaseRun] = Registry("phase run functions")


def benches(phases: Iterable[str]) -> bool:
    """Whether any of ``phases`` runs ``vllm bench serve`` (its case then gets a warm bench client)."""
    return any(RUNS[name].benches for name in phases)


def stall_watched_phases() -> frozenset[str]:
    """The phases during which requests in flight with no token moving is a stall."""
    return frozenset(r.name for r in RUNS.values() if r.stall_watched)
