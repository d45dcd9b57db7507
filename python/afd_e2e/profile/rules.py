"""Rules across sections: device groups fit the cases, phases have workloads, comparisons name real cases."""

from __future__ import annotations

from collections.abc import Callable

from afd_e2e.errors import UsageError
from afd_e2e.profile import catalogue
from afd_e2e.profile.model import CaseSpec, Profile


def check_cross_fields(p: Profile) -> None:
    """Cross-field checks: device groups fit the cases, phases have workloads, comparisons name cases."""

    def fail(key: str, problem: str, fix: str) -> None:
        raise UsageError(f"{p.source}: {key}: {problem}", fix)

    case_ids = {c.id for c in p.cases}
    for case in p.cases:
        _check_placement(p, case, fail)
        for role_name, role in case.roles().items():
            key = f"cases.{case.id}.{'topology' if role_name == 'server' else role_name}"
            if role_name in case.placement:
                continue  # on another agent pool: checked by _check_placement
            if p.platform == "cpu":
                if role.devices is not None:
                    fail(f"{key}.devices", "a cpu profile has no devices", "remove devices")
                if role.dp != 1 or role.ep:
                    fail(key, "DP and EP fail on vLLM's CPU backend", "use dp: 1 and ep: false; compare TP sizes")
                continue
            if role.devices is None:
                fail(f"{key}.devices", "missing", f"name a device group: {', '.join(p.device_groups)}")
            if role.devices not in p.device_groups:
                fail(
                    f"{key}.devices",
                    f"unknown device group {role.devices!r}",
                    f"use one of: {', '.join(p.device_groups)}",
                )
            start, end = p.device_groups[role.devices]
            if end - start != role.ranks:
                fail(
                    key,
                    f"DP{role.dp} x TP{role.tp} = {role.ranks} ranks but group {role.devices!r} has {end - start} devices",
                    "make the group size equal dp * tp",
                )
        if case.kind == "afd" and not case.placement:
            a, f = p.device_groups.get(case.attention.devices or ""), p.device_groups.get(case.ffn.devices or "")
            if a and f and max(a[0], f[0]) < min(a[1], f[1]):
                fail(f"cases.{case.id}", "attention and ffn device groups overlap", "give the roles disjoint groups")
        for phase in case.phases:
            if (missing := catalogue.phase(phase).needs(p)) is not None:
                fail(f"cases.{case.id}.phases", *missing)
        _check_features(p, case, fail)
    for cmp in p.comparisons:
        if cmp.baseline == cmp.candidate:
            fail(f"comparisons.{cmp.id}", f"compares case {cmp.baseline} with itself", "name two different cases")
        for side in ("baseline", "candidate"):
            if getattr(cmp, side) not in case_ids:
                fail(
                    f"comparisons.{cmp.id}.{side}",
                    f"unknown case {getattr(cmp, side)!r}",
                    f"use one of: {', '.join(sorted(case_ids))}",
                )
        known = list(catalogue.MEASURES)
        for measure in cmp.measures:
            if measure not in known:
                fail(
                    f"comparisons.{cmp.id}.measures",
                    f"unknown measure {measure!r}",
                    f"use some of: {', '.join(known)}",
                )
            phase = catalogue.MEASURES[measure].phase
            for side in (cmp.baseline, cmp.candidate):
                if phase not in p.case(side).phases:
                    fail(
                        f"comparisons.{cmp.id}",
                        f"case {side} does not run the {phase} phase",
                        f"add {phase} to its phases",
                    )
        for measure in catalogue.MEASURES.values():
            if measure.name in cmp.measures and (missing := measure.needs(p)) is not None:
                fail(f"comparisons.{cmp.id}", *missing)


def _check_placement(p: Profile, case: CaseSpec, fail: Callable[[str, str, str], None]) -> None:
    """A role on another agent pool: its devices are that agent's, its DP ranks may span several agents of it."""
    if case.placement and not p.engine.interface:
        fail(
            "engine.interface",
            f"case {case.id} places a role on another agent, and the leader's network interface is not named",
            "set engine.interface (e.g. eth0; lo for two agents on one host): its processes listen there",
        )
    for role_name, placement in case.placement.items():
        role = case.roles()[role_name]
        key = f"cases.{case.id}.placement.{role_name}"
        group_key = f"cases.{case.id}.{'topology' if role_name == 'server' else role_name}.devices"
        if role.devices is not None:
            fail(group_key, "a placed role's devices are on its own agent", f"remove it and set {key}.devices")
        if placement.listen in ("0.0.0.0", "::"):
            fail(f"{key}.listen", "listens on every interface", f"remove listen (the address of {placement.interface})")
        if placement.nodes > 1 and p.platform == "cpu":
            fail(f"{key}.nodes", "a role spanning agents needs vLLM's data parallel; the CPU backend has none", "use 1")
        if role.dp % placement.nodes:
            fail(f"{key}.nodes", f"DP{role.dp} does not split over {placement.nodes} agents", "make dp a multiple")
        if p.platform == "cpu":
            if placement.devices:
                fail(f"{key}.devices", "a cpu profile has no devices", "remove devices")
            continue
        per_agent = role.ranks // placement.nodes
        if len(placement.devices) != per_agent:
            fail(
                f"{key}.devices",
                f"lists {len(placement.devices)} devices, each agent runs {per_agent} ranks (DP{role.dp} x TP{role.tp}"
                f" over {placement.nodes} agent(s))",
                f"list {per_agent} device ids of that agent",
            )


def _check_features(p: Profile, case: CaseSpec, fail: Callable[[str, str, str], None]) -> None:
    """CUDA graphs, DBO, the profiler and the NCCL flight recorder: where each can run, and that the phases can see
    them."""
    key = f"cases.{case.id}"
    options = (("graph", case.graph), ("dbo", case.dbo), ("profiler", case.profiler))
    for name, option in (*options, ("nccl_flight_recorder", case.nccl_flight_recorder)):
        if option is not None and p.platform != "cuda":
            fail(f"{key}.{name}", f"{name} needs platform cuda", f"remove {name} or use a cuda profile")
    if (case.profiler is not None) != ("profiler" in case.phases):
        fail(f"{key}.phases", "the profiler option and the profiler phase go together", "set both or neither")
