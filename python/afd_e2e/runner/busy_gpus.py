"""Where ``afd-e2e run`` refuses GPUs that are not idle: preflight's idle check, before anything is launched.

A GPU another process holds makes the run compete for its memory and turns the memory hygiene check into a
comparison against a polluted baseline. ``--allow-busy-gpus`` runs anyway; the results then carry what was busy and
the annotation says so.
"""

from __future__ import annotations

from collections.abc import Callable

from afd_e2e.errors import UsageError
from afd_e2e.gpu.machine_probe import read_machine
from afd_e2e.gpu.readings import MachineReadings
from afd_e2e.plan.model import RunPlan
from afd_e2e.preflight.checks import FAIL, PreflightCheck
from afd_e2e.preflight.idle import check_idle
from afd_e2e.preflight.run_checks import read_inventory
from afd_e2e.profile import Profile
from afd_e2e.system.pids import describe_pid


def busy_gpus(
    profile: Profile, plan: RunPlan, read_hardware: Callable[[], MachineReadings] = read_machine
) -> list[PreflightCheck]:
    """Preflight's failing idle checks for the plan's devices (each names the holding pids); none on the CPU."""
    inventory, why_none = read_inventory(profile, read_hardware)
    return [c for c in check_idle(plan.devices, inventory, why_none, describe_pid) if c.status == FAIL]


def refuse_busy_gpus(busy: list[PreflightCheck], allow: bool) -> None:
    """A UsageError naming the first busy GPU and its holders, unless ``allow`` (``--allow-busy-gpus``)."""
    if busy and not allow:
        more = f" (and {len(busy) - 1} more busy GPUs)" if len(busy) > 1 else ""
        raise UsageError(f"{busy[0].name}: {busy[0].measured}{more}", f"{busy[0].fix}, or pass --allow-busy-gpus")
