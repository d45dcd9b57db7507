"""The NVML session and the readings every GPU probe shares (memory as nvidia-smi judges it, compute pids).

The code here takes the ``pynvml`` module as a parameter: live it is nvidia-ml-py; for recorded machines it is
``afd_e2e.gpu.recorded``, which answers the same calls from a capture, so probes are tested without a GPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

MIB = 1024 * 1024


class NvmlUnavailable(Exception):
    """No NVIDIA driver or NVML here (a CPU machine, or a broken driver); the message says which."""


@contextmanager
def nvml() -> Iterator[Any]:
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
class MemoryReading:
    """Framebuffer bytes. ``used`` is NVML v1's (total - free), which includes what the driver reserves;
    ``reserved`` comes from NVML v2 and is None where the driver or nvidia-ml-py lacks v2."""

    total: int
    used: int
    reserved: int | None

    @property
    def used_as_smi_mib(self) -> int | None:
        """Used MiB as nvidia-smi shows it (reserved excluded); None when reserved is unknown."""
        return None if self.reserved is None else max(0, self.used - self.reserved) // MIB


def read_memory(pynvml: Any, handle: Any) -> MemoryReading:
    try:
        info = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
        return MemoryReading(int(info.total), int(info.total) - int(info.free), int(info.reserved))
    except (pynvml.NVMLError, AttributeError, TypeError):
        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return MemoryReading(int(info.total), int(info.used), None)


def read_compute_processes(pynvml: Any, handle: Any) -> tuple[tuple[int, int | None], ...]:
    """(pid, used bytes or None) of each compute process on the device, by pid."""
    try:
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except pynvml.NVMLError:
        return ()
    readings = []
    for proc in procs:
        used = getattr(proc, "usedGpuMemory", None)
        readings.append((int(proc.pid), int(used) if isinstance(used, int) else None))
    return tuple(sorted(readings))
