"""The execution-proof family: a case that must prove its mode (``execution.require_proof``) has a phase that can,
checked from the plan before any model loads (``execution/provable.py`` says which cases cannot)."""

from __future__ import annotations

from afd_e2e.execution.provable import unprovable
from afd_e2e.plan import RunPlan
from afd_e2e.preflight.checks import failed, passed, skipped
from afd_e2e.profile import Profile
from afd_e2e.results.model import PreflightCheck

NAME = "execution proof"


def check_proof(profile: Profile, plan: RunPlan) -> list[PreflightCheck]:
    if not profile.require_proof:
        return [skipped(NAME, "the profile does not require proof of execution modes (execution.require_proof)")]
    problems = unprovable(profile, plan)
    wanted = "a profiler phase whose active window reaches decode steps, in each case that asks CUDA graphs"
    if not problems:
        return [passed(NAME, "every case can prove its execution mode", wanted)]
    return [failed(f"{NAME} {p.case}", p.problem, wanted, p.fix) for p in problems]
