"""Where device pairs are checked: every pair of the plan's GPUs has an interconnect the profile allows, and, per AFD
case, each Attention device and its FFN peer (Attention rank i with FFN rank i·Y/X) has NVLink when the profile
requires it."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

from afd_e2e.gpu.inventory import Inventory
from afd_e2e.gpu.topology import NVLINK, UNKNOWN, Link, pair_link
from afd_e2e.plan import CasePlan, RunPlan
from afd_e2e.preflight.checks import WARN, PreflightCheck, failed, passed, skipped
from afd_e2e.profile import HardwareSpec

PAIRS = "interconnect"


def check_interconnect(
    hardware: HardwareSpec, plan: RunPlan, inventory: Inventory | None, why_none: str
) -> list[PreflightCheck]:
    afd_cases = [case for case in plan.cases if case.kind == "afd"]
    role_names = [f"{PAIRS} {case.id}" for case in afd_cases]
    if inventory is None:
        return [skipped(name, why_none) for name in (PAIRS, *role_names)]
    devices = [d for d in plan.devices if inventory.gpu(d) is not None]
    if len(devices) < len(plan.devices):
        return [skipped(name, "some listed devices are not on this machine") for name in (PAIRS, *role_names)]
    return [_pairs(hardware, devices, inventory), *(_roles(hardware, case, inventory) for case in afd_cases)]


def _pairs(hardware: HardwareSpec, devices: list[int], inventory: Inventory) -> PreflightCheck:
    allowed = set(hardware.interconnects)
    wanted = " or ".join(hardware.interconnects)
    links = {(a, b): pair_link(inventory.links, a, b) for a, b in combinations(devices, 2)}
    if not links:
        return passed(PAIRS, "one device: no pairs", wanted)
    summary = ", ".join(f"{label} x{n}" for label, n in sorted(Counter(ln.label for ln in links.values()).items()))
    measured = f"{len(links)} pair{'s' if len(links) > 1 else ''}: {summary}"
    bad = [f"GPU{a}-GPU{b} {ln.label}" for (a, b), ln in links.items() if ln.kind not in allowed | {UNKNOWN}]
    if bad:
        return failed(
            PAIRS,
            f"{measured}; not allowed: {', '.join(bad)}",
            wanted,
            "pick --devices whose pairs the profile allows, or extend hardware.interconnects",
        )
    unknown = {(a, b): ln for (a, b), ln in links.items() if ln.kind == UNKNOWN}
    if unknown:
        return PreflightCheck(PAIRS, WARN, f"{measured}; unknown: {_names(unknown)}", wanted, _unknown_fix(unknown))
    return passed(PAIRS, measured, wanted)


def _names(links: dict[tuple[int, int], Link]) -> str:
    return ", ".join(f"GPU{a}-GPU{b}" for a, b in links)


def _unknown_fix(unknown: dict[tuple[int, int], Link]) -> str:
    """Why the pairs are unknown (NVML could not place them; the topo -m text, if any, did not either)."""
    return f"NVML could not place these pairs ({next(iter(unknown.values())).source}); make `nvidia-smi topo -m` work"


def role_pairs(case: CasePlan) -> list[tuple[int, int]]:
    """(Attention device, FFN peer) for an AFD case: Attention rank i talks to FFN rank i·Y/X."""
    attention = next(p.devices for p in case.processes if p.role == "attention")
    ffn = next(p.devices for p in case.processes if p.role == "ffn")
    return [(device, ffn[i * len(ffn) // len(attention)]) for i, device in enumerate(attention)]


def _roles(hardware: HardwareSpec, case: CasePlan, inventory: Inventory) -> PreflightCheck:
    name = f"{PAIRS} {case.id}"
    pairs = role_pairs(case)
    measured = ", ".join(f"GPU{a}-GPU{b} {pair_link(inventory.links, a, b).label}" for a, b in pairs)
    if not hardware.require_nvlink_between_roles:
        return passed(name, measured, "Attention-FFN pairs: any allowed interconnect")
    unknown = {(a, b): pair_link(inventory.links, a, b) for a, b in pairs}
    unknown = {pair: ln for pair, ln in unknown.items() if ln.kind == UNKNOWN}
    without = [f"GPU{a}-GPU{b}" for a, b in pairs if pair_link(inventory.links, a, b).kind not in (NVLINK, UNKNOWN)]
    if unknown and not without:
        wanted = "NVLink between each Attention device and its FFN peer"
        return PreflightCheck(name, WARN, f"{measured}; unknown: {_names(unknown)}", wanted, _unknown_fix(unknown))
    if without:
        return failed(
            name,
            measured,
            "NVLink between each Attention device and its FFN peer",
            f"reorder --devices so each Attention device's FFN peer has NVLink (no NVLink: {', '.join(without)})",
        )
    return passed(name, measured, "NVLink between each Attention device and its FFN peer")
