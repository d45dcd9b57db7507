"""Where the plan's GPUs are checked idle: no compute process, memory used at baseline as nvidia-smi counts it.

nvidia-smi shows 0 MiB used on an idle GPU: the memory the driver reserves is not "used" (../shared/reference/gpu.md),
so "used" here excludes it; a little slack absorbs what a display or a monitoring agent may hold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from afd_e2e.gpu.inventory import Inventory
from afd_e2e.gpu.nvml import MIB
from afd_e2e.gpu.readings import ProcessReading
from afd_e2e.preflight.checks import WARN, PreflightCheck, failed, passed, skipped
from afd_e2e.results.model import HardwareGpu

IDLE_SLACK_MIB = 64


def check_idle(
    devices: Sequence[int], inventory: Inventory | None, why_none: str, describe_pid: Callable[[int], str]
) -> list[PreflightCheck]:
    """One check per device, in plan order; ``describe_pid`` names a process (``pid N (name)``)."""
    if inventory is None:
        return [skipped("idle", why_none)]
    return [
        _idle(gpu, inventory.processes.get(d, ()), describe_pid)
        for d in devices
        if (gpu := inventory.gpu(d)) is not None
    ]


def _idle(gpu: HardwareGpu, processes: Sequence[ProcessReading], describe_pid: Callable[[int], str]) -> PreflightCheck:
    name = f"idle GPU{gpu.index}"
    wanted = f"no compute process, <= {IDLE_SLACK_MIB} MiB used"
    if processes:
        holders = [
            describe_pid(p.pid) + (f" holding {p.used_bytes // MIB} MiB" if p.used_bytes is not None else "")
            for p in processes
        ]
        pids = " ".join(str(p.pid) for p in processes)
        used = gpu.memory_used_mib if gpu.memory_used_mib is not None else gpu.memory_used_v1_mib
        return failed(
            name, f"{used} MiB used by {', '.join(holders)}", wanted, f"stop it (kill {pids}) or pick other --devices"
        )
    if gpu.memory_used_mib is None:
        if gpu.memory_used_v1_mib <= IDLE_SLACK_MIB:
            return passed(name, f"{gpu.memory_used_v1_mib} MiB used, no compute process", wanted)
        return PreflightCheck(
            name,
            WARN,
            f"{gpu.memory_used_v1_mib} MiB used including driver-reserved memory (NVML gives no v2 memory info)",
            wanted,
            "update the driver or nvidia-ml-py so reserved memory can be told apart",
        )
    if gpu.memory_used_mib > IDLE_SLACK_MIB:
        return failed(
            name,
            f"{gpu.memory_used_mib} MiB used, no compute process visible",
            wanted,
            "find the holder with nvidia-smi on the host (another container?) and stop it, or pick other --devices",
        )
    return passed(name, f"{gpu.memory_used_mib} MiB used, no compute process", wanted)
