"""Whether each case's execution mode can be proven by the phases it runs, known from the plan before any server
starts.

CUDA graph replay is shown only by the profiler's trace (graph launches in decode steps, ``judge.py``); the log
says at most that graphs were captured. So a case that asks for graphs in a profile that requires proof
(``execution.require_proof``) and runs no profiler phase can only end ``unproven``, failed, after its whole GPU
time (the 12-05 run: six minutes). The profiler's active window must also reach the decode steps: on vLLM 0.26
(12-05, ``../shared/fixtures/gpu/runs-2026-12-05``) ``wait: 0, warmup: 1, active: 1`` traced the first request's
prefill step alone, ``wait: 2, warmup: 1, active: 4`` traced four decode steps. Eager and compiled modes are
proven by start-up lines, which every case has.
"""

from __future__ import annotations

from dataclasses import dataclass

from afd_e2e.execution.asked import GRAPHS, asked_of
from afd_e2e.plan.model import RunPlan
from afd_e2e.profile import Profile

# Steps the profiler must let pass before its active window, so the window starts after the first request's prefill.
MIN_STEPS_BEFORE_ACTIVE = 2
SCHEDULE_FIX = "profiler: {wait: 2, warmup: 1, active: 4}"


@dataclass(frozen=True)
class Unprovable:
    case: str
    problem: str  # one line naming the case and why its proof cannot come
    fix: str


def unprovable(profile: Profile, plan: RunPlan) -> list[Unprovable]:
    """The cases (forced-routing controls aside) whose asked CUDA graphs no phase of theirs can prove, under
    ``require_proof``; empty where proof is not required."""
    if not profile.require_proof:
        return []
    found = []
    for case in plan.cases:
        if case.control:
            continue
        roles = [p.name for p in case.processes if asked_of(p.argv, plan.platform, p.env_set).mode == GRAPHS]
        if not roles:
            continue
        asks = f"case {case.id} asks CUDA graphs ({', '.join(roles)}) and the profile requires proof"
        spec = profile.case(case.id).profiler
        if "profiler" not in case.phases or spec is None:
            found.append(
                Unprovable(
                    case.id,
                    f"{asks}, but it runs no profiler phase: graph replay is shown only by a profiler trace",
                    f"add profiler to cases.{case.id}.phases with {SCHEDULE_FIX}, "
                    "or set execution.require_proof: false",
                )
            )
        elif spec.wait + spec.warmup < MIN_STEPS_BEFORE_ACTIVE:
            found.append(
                Unprovable(
                    case.id,
                    f"{asks}, but its profiler's active window starts after {spec.wait + spec.warmup} step(s), "
                    "on the first request's prefill: it would trace no decode step",
                    f"set cases.{case.id}.{SCHEDULE_FIX} (the active window after the prefill)",
                )
            )
    return found
