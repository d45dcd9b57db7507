"""GPU memory and compute processes per device, judged the way nvidia-smi judges them.

nvidia-smi shows 0 MiB used on an idle H200 while NVML's v1 ``used`` includes ~615 MiB the driver reserves
(../shared/reference/gpu.md). So "used" here excludes ``reserved`` where the driver offers NVML v2 memory info,
else it is v1 ``used``; callers compare against a baseline taken before the case, which removes any remaining
driver offset.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from afd_e2e.gpu.nvml import MIB, NvmlUnavailable, nvml, read_compute_processes, read_memory

__all__ = ["DeviceMemory", "NvmlUnavailable", "nvml", "read_device_memory"]


@dataclass(frozen=True)
class DeviceMemory:
    index: int
    used_mib: int  # as nvidia-smi reports "used" (reserved excluded)
    total_mib: int
    compute_pids: tuple[int, ...]


def read_device_memory(indices: Iterable[int]) -> dict[int, DeviceMemory]:
    """Memory used and compute pids per device index; raises NvmlUnavailable without NVML."""
    readings = {}
    with nvml() as pynvml:
        for index in indices:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = read_memory(pynvml, handle)
            used = memory.used_as_smi_mib
            pids = tuple(pid for pid, _ in read_compute_processes(pynvml, handle))
            readings[index] = DeviceMemory(
                index, memory.used // MIB if used is None else used, memory.total // MIB, pids
            )
    return readings
