"""What a machine's NVML said, as plain records and as JSON (the shape of ../shared/fixtures/gpu/*/pynvml.json).

A reading the driver could not give is None here; in JSON it is null or, as in the first captures, the error's text.
``machine_probe.read_machine`` fills these records live; ``replay`` answers NVML calls from them; the capture script writes
them out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from afd_e2e.errors import UsageError
from afd_e2e.gpu.nvml import MemoryReading

_BUS_ID = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]$")


def normalize_bus_id(text: str) -> str:
    """NVML writes the PCI domain with 4 or 8 digits; compare bus ids as ``0000:bb:dd.f`` in lower case."""
    domain, rest = text.lower().split(":", 1)
    return f"{int(domain, 16):04x}:{rest}"


def bus_id_or_none(value: Any) -> str | None:
    return normalize_bus_id(value) if isinstance(value, str) and _BUS_ID.match(value) else None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class NvLinkReading:
    link: int
    active: bool
    remote_bus_id: str | None  # the PCI bus id at the far end (a GPU, or an NVSwitch), normalized
    remote_type: int | None  # NVML_NVLINK_DEVICE_TYPE_*: 0 GPU, 1 IBM NPU, 2 NVSwitch, 0xFF unknown


@dataclass(frozen=True)
class ProcessReading:
    pid: int
    used_bytes: int | None


@dataclass(frozen=True)
class GpuReading:
    index: int
    name: str
    uuid: str
    bus_id: str  # normalized
    total_bytes: int
    used_bytes: int  # NVML v1: total - free, driver-reserved memory included
    reserved_bytes: int | None  # NVML v2; None where unavailable
    nvlinks: tuple[NvLinkReading, ...]
    processes: tuple[ProcessReading, ...]

    @property
    def memory(self) -> MemoryReading:
        return MemoryReading(self.total_bytes, self.used_bytes, self.reserved_bytes)


@dataclass(frozen=True)
class PairReading:
    common_ancestor: int | None  # NVML_TOPOLOGY_* level (10 PIX ... 50 SYS)
    p2p_nvlink: int | None  # NVML P2P status over NVLink: 0 OK, else the reason it is not possible


@dataclass(frozen=True)
class MachineReadings:
    driver: str
    cuda_driver: int | None  # e.g. 13000 for CUDA 13.0
    nvml_version: str | None
    gpus: tuple[GpuReading, ...]
    pairs: dict[tuple[int, int], PairReading] = field(default_factory=dict)  # keyed (i, j) with i < j
    topo_m: str | None = None  # `nvidia-smi topo -m` text, read only when NVML could not place some pair

    def pair(self, a: int, b: int) -> PairReading:
        return self.pairs.get((min(a, b), max(a, b)), PairReading(None, None))


def readings_to_json(readings: MachineReadings) -> dict[str, Any]:
    data: dict[str, Any] = {
        "driver": readings.driver,
        "cuda_driver": readings.cuda_driver,
        "nvml": readings.nvml_version,
        "gpus": [
            {
                "index": gpu.index,
                "name": gpu.name,
                "uuid": gpu.uuid,
                "bus": gpu.bus_id,
                "total": gpu.total_bytes,
                "used": gpu.used_bytes,
                "reserved": gpu.reserved_bytes,
                "nvlinks": [
                    {
                        "link": ln.link,
                        "state": int(ln.active),
                        "remote": ln.remote_bus_id,
                        "remote_type": ln.remote_type,
                    }
                    for ln in gpu.nvlinks
                ],
                "procs": [{"pid": p.pid, "used": p.used_bytes} for p in gpu.processes],
            }
            for gpu in readings.gpus
        ],
        "pairs": {
            f"{a}-{b}": {"ancestor": pair.common_ancestor, "p2p_nvlink": pair.p2p_nvlink}
            for (a, b), pair in sorted(readings.pairs.items())
        },
    }
    if readings.topo_m is not None:
        data["topo_m"] = readings.topo_m
    return data


def readings_from_json(data: dict[str, Any]) -> MachineReadings:
    gpus = tuple(
        GpuReading(
            index=int(g["index"]),
            name=str(g["name"]),
            uuid=str(g["uuid"]),
            bus_id=normalize_bus_id(g["bus"]),
            total_bytes=int(g["total"]),
            used_bytes=int(g["used"]),
            reserved_bytes=_int_or_none(g.get("reserved")),
            nvlinks=tuple(
                NvLinkReading(
                    link=int(ln["link"]),
                    active=ln.get("state") == 1,
                    remote_bus_id=bus_id_or_none(ln.get("remote")),
                    remote_type=_int_or_none(ln.get("remote_type")),
                )
                for ln in g.get("nvlinks", [])
            ),
            processes=tuple(ProcessReading(int(p["pid"]), _int_or_none(p.get("used"))) for p in g.get("procs", [])),
        )
        for g in data["gpus"]
    )
    pairs = {}
    for key, pair in data.get("pairs", {}).items():
        a, b = (int(part) for part in key.split("-"))
        pairs[(min(a, b), max(a, b))] = PairReading(
            _int_or_none(pair.get("ancestor")), _int_or_none(pair.get("p2p_nvlink"))
        )
    return MachineReadings(
        driver=str(data["driver"]),
        cuda_driver=_int_or_none(data.get("cuda_driver")),
        nvml_version=data.get("nvml") if isinstance(data.get("nvml"), str) else None,
        gpus=gpus,
        pairs=pairs,
        topo_m=data.get("topo_m"),
    )


def load_readings(path: Path) -> MachineReadings:
    """Recorded readings from a JSON file; a missing or malformed file is a UsageError."""
    try:
        return readings_from_json(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(
            f"{path}: not NVML readings ({type(exc).__name__}: {exc})",
            "pass a pynvml.json written by scripts/capture-gpu-fixtures",
        ) from exc
