"""The benchmark-only forced-routing control: an ``afd_balanced`` twin of each AFD performance candidate.

Forcing balanced expert routing changes what the model computes, so such a run is never correctness or headline
performance evidence: its case runs the performance phase only, its comparison is marked ``control`` and the
verdict ignores it. Every other child keeps stripping the forcing variables (``engine.env.strip``).
"""

from __future__ import annotations

from dataclasses import replace

from afd_e2e.errors import UsageError
from afd_e2e.profile import CaseSpec, ComparisonSpec, Profile

STRATEGY_ENV = "VLLM_MOE_ROUTING_SIMULATION_STRATEGY"
STRATEGY = "afd_balanced"
SUFFIX = "afd-balanced"


def strategy_refusal(known: tuple[str, ...] | None, problem: str | None, vllm: str | None) -> UsageError | None:
    """Why the control cannot run on the vLLM that would be launched (None when it knows the strategy).

    vLLM raises ``Unknown routing strategy`` only in the FFN engine's first forward, after the model is loaded; this
    asks beforehand (``afd_e2e.system.engine_probe`` lists the strategies once vLLM's general plugins are loaded).
    """
    if known is not None and STRATEGY in known:
        return None
    fix = f"install an AFD plugin that registers the {STRATEGY} routing strategy, or drop --forced-routing-control"
    if known is None:
        return UsageError(f"cannot tell whether vLLM knows {STRATEGY_ENV}={STRATEGY}: {problem or 'not asked'}", fix)
    available = ", ".join(known) or "none"
    return UsageError(f"{STRATEGY_ENV}={STRATEGY} is unknown to vLLM {vllm}: it knows {available}", fix)


def control_label(label: str) -> str:
    return f"{label}, {STRATEGY} routing (control)"


def routing_controls(profile: Profile, selected: list[CaseSpec]) -> list[tuple[CaseSpec, ComparisonSpec]]:
    """One control case and comparison per performance comparison whose candidate is AFD and selected."""
    selected_ids = {c.id for c in selected}
    controls = []
    for comparison in profile.comparisons:
        candidate = profile.case(comparison.candidate)
        wanted = {comparison.baseline, comparison.candidate} <= selected_ids
        if "performance" not in comparison.measures or candidate.kind != "afd" or not wanted:
            continue
        case = replace(
            candidate,
            id=f"{candidate.id}-{SUFFIX}",
            description=f"{candidate.id} with {STRATEGY_ENV}={STRATEGY}: benchmark-only control",
            phases=("performance",),
            env_set={**candidate.env_set, STRATEGY_ENV: STRATEGY},
        )
        controls.append(
            (case, replace(comparison, id=f"{comparison.id}-{SUFFIX}", candidate=case.id, measures=("performance",)))
        )
    if not controls:
        raise UsageError(
            f"profile {profile.name} has no selected performance comparison with an AFD candidate to control",
            "drop --forced-routing-control or select the AFD performance cases",
        )
    return controls
