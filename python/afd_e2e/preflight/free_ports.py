"""Where the plan's ports are checked free (API, FFN and AFD connector ports of every case), naming each holder."""

from __future__ import annotations

from collections.abc import Mapping

from afd_e2e.plan import RunPlan
from afd_e2e.preflight.checks import PreflightCheck, failed, passed

PORTS = "ports"


def plan_ports(plan: RunPlan) -> list[int]:
    return sorted({port for case in plan.cases for port in case.ports})


def port_ranges(ports: list[int]) -> str:
    """[18000, 18001, 18002, 18020] -> "18000-18002, 18020"."""
    spans: list[list[int]] = []
    for port in ports:
        if spans and port == spans[-1][1] + 1:
            spans[-1][1] = port
        else:
            spans.append([port, port])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def check_plan_ports(plan: RunPlan, host: str, busy: Mapping[int, str]) -> list[PreflightCheck]:
    """``busy`` maps each port that cannot be bound on ``host`` to its holder (``afd_e2e.system.ports.busy_ports``)."""
    ports = plan_ports(plan)
    wanted = f"free on {host}: {port_ranges(ports)}"
    if busy:
        held = ", ".join(f"{port} held by {holder}" for port, holder in sorted(busy.items()))
        return [failed(PORTS, held, wanted, "stop the holder(s), or pass --port-base to move the plan's ports")]
    return [passed(PORTS, f"{len(ports)} ports free", wanted)]
