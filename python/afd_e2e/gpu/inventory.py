"""The machine as preflight, agent tags and reports see it: driver and CUDA versions, GPUs, the link matrix.

Pure: derived from MachineReadings, so it is the same for a live machine and a recorded one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from afd_e2e.gpu.nvml import MIB
from afd_e2e.gpu.readings import GpuReading, MachineReadings, ProcessReading
from afd_e2e.gpu.topology import Link, link_matrix, render_matrix
from afd_e2e.results.model import Hardware, HardwareGpu, HardwareLink


def cuda_version_text(value: int | None) -> str | None:
    """NVML's CUDA driver version integer as text: 13000 -> "13.0", 12040 -> "12.4"."""
    return None if value is None else f"{value // 1000}.{(value % 1000) // 10}"


def version_tuple(text: str) -> tuple[int, ...]:
    """ "580.159.04" -> (580, 159, 4); stops at the first part that is not a number."""
    parts = []
    for part in text.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def _gpu(reading: GpuReading) -> HardwareGpu:
    return HardwareGpu(
        index=reading.index,
        name=reading.name,
        uuid=reading.uuid,
        bus_id=reading.bus_id,
        memory_total_mib=reading.total_bytes // MIB,
        memory_used_mib=reading.memory.used_as_smi_mib,  # as nvidia-smi shows it; None when NVML lacks v2
        memory_used_v1_mib=reading.used_bytes // MIB,  # driver-reserved included
        compute_pids=[p.pid for p in reading.processes],
    )


@dataclass(frozen=True)
class Inventory:
    """The GPUs as results.json records them (``HardwareGpu``), what each one's processes hold, and the links."""

    driver: str
    cuda: str | None
    gpus: tuple[HardwareGpu, ...]
    links: dict[tuple[int, int], Link]  # every pair (i, j), i < j
    processes: dict[int, tuple[ProcessReading, ...]] = field(default_factory=dict)  # by GPU index

    def gpu(self, index: int) -> HardwareGpu | None:
        return self.gpus[index] if 0 <= index < len(self.gpus) else None

    def matrix(self, devices: list[int] | None = None) -> list[list[str]]:
        return render_matrix(self.links, devices if devices is not None else [g.index for g in self.gpus])

    def hardware(self) -> Hardware:
        """The inventory as preflight reports it and results.json stores it."""
        return Hardware(
            driver=self.driver,
            cuda=self.cuda,
            gpus=list(self.gpus),
            links=[
                HardwareLink(gpus=[a, b], kind=link.kind, label=link.label, nvlinks=link.nvlinks, source=link.source)
                for (a, b), link in sorted(self.links.items())
            ],
            matrix=self.matrix(),
        )


def build_inventory(readings: MachineReadings) -> Inventory:
    return Inventory(
        driver=readings.driver,
        cuda=cuda_version_text(readings.cuda_driver),
        gpus=tuple(_gpu(g) for g in readings.gpus),
        links=link_matrix(readings),
        processes={g.index: g.processes for g in readings.gpus},
    )
