"""GPU memory and compute processes per device, judged the way nvidia-smi judges them.

nvidia-smi shows 0 MiB used on an idle H200 while NVML's v1 ``used`` includes ~615 MiB the driver reserves
(../shared/reference/gpu.md). So "used" here is NVML v2's ``used`` (which excludes ``reserved``) where the driver
offers it, else v1 ``used``; callers compare against a baseline taken before the case, which removes any
remaining driver offset.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

MIB = 1024 * 1024


class NvmlUnavailable(Exception):
    """No NVIDIA driver or NVML here (a CPU machine, or a broken driver); the message says which."""


@contextmanager
def nvml() -> Iterator[object]:
    """Initialise NVML for the block; raise NvmlUnavailable with the reason when it cannot be."""
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable("nvidia-ml-py (pynvml) is not installed") from exc
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"NVML cannot initialise: {exc}") from exc
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()


@dataclass(frozen=True)
class DeviceMemory:
    index: int
    used_mib: int  # as nvidia-smi reports "used" (reserved excluded)
    total_mib: int
    compute_pids: tuple[int, ...]


def _used_mib(pynvml: object, handle: object) -> tuple[int, int]:
    try:
        info = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
        return int(info.used) // MIB, int(info.total) // MIB
    except (pynvml.NVMLError, AttributeError, TypeError):
        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return int(info.used) // MIB, int(info.total) // MIB


def read_device_memory(indices: Iterable[int]) -> dict[int, DeviceMemory]:
    """Memory used and compute pids per device index; raises NvmlUnavailable without NVML."""
    readings = {}
    with nvml() as pynvml:
        for index in indices:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            used, total = _used_mib(pynvml, handle)
            try:
                procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
                pids = tuple(sorted(int(p.pid) for p in procs))
            except pynvml.NVMLError:
                pids = ()
            readings[index] = DeviceMemory(index, used, total, pids)
    return readings
