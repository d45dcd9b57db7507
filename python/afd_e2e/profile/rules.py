"""Rules across sections: device groups fit the cases, phases have workloads, comparisons name real cases."""

from __future__ import annotations

from afd_e2e.errors import UsageError
from afd_e2e.profile.model import Profile


def check_cross_fields(p: Profile) -> None:
    """Cross-field checks: device groups fit the cases, phases have workloads, comparisons name cases."""

    def fail(key: str, problem: str, fix: str) -> None:
        raise UsageError(f"{p.source}: {key}: {problem}", fix)

    case_ids = {c.id for c in p.cases}
    for case in p.cases:
        for role_name, role in case.roles().items():
            key = f"cases.{case.id}.{'topology' if role_name == 'server' else role_name}"
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
        if case.kind == "afd":
            a, f = p.device_groups.get(case.attention.devices or ""), p.device_groups.get(case.ffn.devices or "")
            if a and f and max(a[0], f[0]) < min(a[1], f[1]):
                fail(f"cases.{case.id}", "attention and ffn device groups overlap", "give the roles disjoint groups")
        for phase in case.phases:
            if phase == "correctness" and p.gsm8k is None and p.parity is None:
                fail(f"cases.{case.id}.phases", "correctness phase without workloads.gsm8k or parity", "add one")
            if phase == "performance" and p.bench is None:
                fail(f"cases.{case.id}.phases", "performance phase without workloads.bench", "add workloads.bench")
    for cmp in p.comparisons:
        for side in ("baseline", "candidate"):
            if getattr(cmp, side) not in case_ids:
                fail(
                    f"comparisons.{cmp.id}.{side}",
                    f"unknown case {getattr(cmp, side)!r}",
                    f"use one of: {', '.join(sorted(case_ids))}",
                )
        for measure in cmp.measures:
            if measure not in ("parity", "performance"):
                fail(f"comparisons.{cmp.id}.measures", f"unknown measure {measure!r}", "use parity and/or performance")
            phase = "correctness" if measure == "parity" else "performance"
            for side in (cmp.baseline, cmp.candidate):
                if phase not in p.case(side).phases:
                    fail(
                        f"comparisons.{cmp.id}",
                        f"case {side} does not run the {phase} phase",
                        f"add {phase} to its phases",
                    )
        if "parity" in cmp.measures and p.parity is None:
            fail(f"comparisons.{cmp.id}", "parity measure without workloads.parity", "add workloads.parity")
