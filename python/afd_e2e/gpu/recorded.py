"""A stand-in for the ``pynvml`` module that answers from recorded readings.

``probe.read_machine(recorded.session, recorded.topo_m)`` runs the same code as on a live GPU machine, so preflight and
agent tags can be evaluated against a captured machine (``--readings``), and tested and benchmarked without a GPU.
A reading that was not recorded raises NVMLError NotSupported, as the driver does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from afd_e2e.gpu.machine_probe import read_machine
from afd_e2e.gpu.nvml import NvmlUnavailable
from afd_e2e.gpu.readings import MachineReadings, load_readings

NVML_ERROR_NOT_SUPPORTED = 3
MEMORY_V2 = 0x02000028


class NVMLError(Exception):
    def __init__(self, value: int = NVML_ERROR_NOT_SUPPORTED) -> None:
        self.value = value
        super().__init__(f"NVMLError({value}): Not Supported (replayed)")


class ReplayNvml:
    """The subset of pynvml that ``afd_e2e.gpu`` calls; handles are device indices."""

    NVMLError = NVMLError
    nvmlMemory_v2 = MEMORY_V2
    NVML_NVLINK_MAX_LINKS = 18
    NVML_FEATURE_ENABLED = 1
    NVML_P2P_CAPS_INDEX_NVLINK = 2

    def __init__(self, readings: MachineReadings) -> None:
        self.readings = readings
        self.calls = 0  # NVML calls answered: the benchmark reports it

    @contextmanager
    def session(self) -> Iterator[ReplayNvml]:
        """Stands for ``afd_e2e.gpu.nvml.nvml``."""
        yield self

    def topo_m(self) -> str:
        """Stands for ``afd_e2e.gpu.smi.run_topo_m``: the recorded text, if any."""
        if self.readings.topo_m is None:
            raise NvmlUnavailable("no nvidia-smi topo -m text was recorded")
        return self.readings.topo_m

    def _answer(self, value: Any) -> Any:
        self.calls += 1
        if value is None:
            raise NVMLError()
        return value

    def nvmlSystemGetDriverVersion(self) -> str:
        return self._answer(self.readings.driver)

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return self._answer(self.readings.cuda_driver)

    def nvmlSystemGetNVMLVersion(self) -> str:
        return self._answer(self.readings.nvml_version)

    def nvmlDeviceGetCount(self) -> int:
        return self._answer(len(self.readings.gpus))

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return self._answer(index if 0 <= index < len(self.readings.gpus) else None)

    def nvmlDeviceGetName(self, handle: int) -> str:
        return self._answer(self.readings.gpus[handle].name)

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return self._answer(self.readings.gpus[handle].uuid)

    def nvmlDeviceGetPciInfo(self, handle: int) -> SimpleNamespace:
        return self._answer(SimpleNamespace(busId=self.readings.gpus[handle].bus_id))

    def nvmlDeviceGetMemoryInfo(self, handle: int, version: int | None = None) -> SimpleNamespace:
        gpu = self.readings.gpus[handle]
        if version is None:
            return self._answer(
                SimpleNamespace(total=gpu.total_bytes, used=gpu.used_bytes, free=gpu.total_bytes - gpu.used_bytes)
            )
        if gpu.reserved_bytes is None:
            return self._answer(None)
        used = gpu.used_bytes - gpu.reserved_bytes
        free = gpu.total_bytes - gpu.used_bytes
        return self._answer(SimpleNamespace(total=gpu.total_bytes, reserved=gpu.reserved_bytes, used=used, free=free))

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[SimpleNamespace]:
        procs = self.readings.gpus[handle].processes
        return self._answer([SimpleNamespace(pid=p.pid, usedGpuMemory=p.used_bytes) for p in procs])

    def _link(self, handle: int, link: int) -> Any:
        links = self.readings.gpus[handle].nvlinks
        return links[link] if link < len(links) else None

    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        reading = self._link(handle, link)
        return self._answer(None if reading is None else int(reading.active))

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: int, link: int) -> SimpleNamespace:
        reading = self._link(handle, link)
        bus = reading.remote_bus_id if reading is not None else None
        return self._answer(SimpleNamespace(busId=bus) if bus is not None else None)

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: int, link: int) -> int:
        reading = self._link(handle, link)
        return self._answer(reading.remote_type if reading is not None else None)

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:
        return self._answer(self.readings.pair(a, b).common_ancestor)

    def nvmlDeviceGetP2PStatus(self, a: int, b: int, index: int) -> int:
        return self._answer(self.readings.pair(a, b).p2p_nvlink if index == self.NVML_P2P_CAPS_INDEX_NVLINK else None)


def recorded_machine(path: Path) -> Callable[[], MachineReadings]:
    """A hardware reader for preflight and agent tags that reads the machine recorded in ``path``."""
    replay = ReplayNvml(load_readings(path))
    return lambda: read_machine(replay.session, replay.topo_m)
