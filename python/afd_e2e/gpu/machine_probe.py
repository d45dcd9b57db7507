"""Read the whole machine through NVML in one session: driver, CUDA, every GPU, every NVLink, every device pair.

About 60 NVML calls per GPU plus two per pair and no subprocess, unless NVML cannot place some pair (neither NVLink
nor a PCIe common ancestor): then ``nvidia-smi topo -m`` runs once, for all GPUs.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, suppress
from dataclasses import replace
from itertools import combinations
from typing import Any

from afd_e2e.gpu.nvml import NvmlUnavailable, nvml, read_compute_processes, read_memory
from afd_e2e.gpu.readings import (
    GpuReading,
    MachineReadings,
    NvLinkReading,
    PairReading,
    ProcessReading,
    bus_id_or_none,
    normalize_bus_id,
)
from afd_e2e.gpu.smi import run_topo_m
from afd_e2e.gpu.topology import needs_topo_m

Session = Callable[[], AbstractContextManager[Any]]


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _call(pynvml: Any, name: str, *args: Any) -> Any:
    """A reading some drivers or nvidia-ml-py versions lack (NotSupported, or no such function): None then."""
    function = getattr(pynvml, name, None)
    if function is None:
        return None
    try:
        return function(*args)
    except pynvml.NVMLError:
        return None


def _remote_bus_id(pynvml: Any, handle: Any, link: int) -> str | None:
    # nvidia-ml-py names it with or without _v2 depending on its version (../shared/fixtures/gpu/h200x2/pynvml.json).
    name = "nvmlDeviceGetNvLinkRemotePciInfo_v2"
    info = _call(pynvml, name if hasattr(pynvml, name) else "nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
    return bus_id_or_none(_text(info.busId)) if info is not None else None


def _nvlinks(pynvml: Any, handle: Any) -> tuple[NvLinkReading, ...]:
    links = []
    for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
        state = _call(pynvml, "nvmlDeviceGetNvLinkState", handle, link)
        if state is None:  # no NVLink on this GPU, or past its last link
            break
        if state != pynvml.NVML_FEATURE_ENABLED:
            links.append(NvLinkReading(link, False, None, None))
            continue
        remote_type = _call(pynvml, "nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
        links.append(NvLinkReading(link, True, _remote_bus_id(pynvml, handle, link), remote_type))
    return tuple(links)


def _gpu(pynvml: Any, index: int, handle: Any) -> GpuReading:
    memory = read_memory(pynvml, handle)
    return GpuReading(
        index=index,
        name=_text(pynvml.nvmlDeviceGetName(handle)),
        uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
        bus_id=normalize_bus_id(_text(pynvml.nvmlDeviceGetPciInfo(handle).busId)),
        total_bytes=memory.total,
        used_bytes=memory.used,
        reserved_bytes=memory.reserved,
        nvlinks=_nvlinks(pynvml, handle),
        processes=tuple(ProcessReading(pid, used) for pid, used in read_compute_processes(pynvml, handle)),
    )


def read_machine(session: Session = nvml, topo_m: Callable[[], str] = run_topo_m) -> MachineReadings:
    """Everything preflight and agent tags need about the GPUs; NvmlUnavailable when NVML cannot start."""
    with session() as pynvml:
        try:
            driver = _text(pynvml.nvmlSystemGetDriverVersion())
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            gpus = tuple(_gpu(pynvml, index, handle) for index, handle in enumerate(handles))
        except pynvml.NVMLError as exc:
            raise NvmlUnavailable(f"NVML cannot read the GPUs: {exc}") from exc
        nvml_version = _call(pynvml, "nvmlSystemGetNVMLVersion")
        pairs = {
            (a, b): PairReading(
                common_ancestor=_call(pynvml, "nvmlDeviceGetTopologyCommonAncestor", handles[a], handles[b]),
                p2p_nvlink=_call(
                    pynvml, "nvmlDeviceGetP2PStatus", handles[a], handles[b], pynvml.NVML_P2P_CAPS_INDEX_NVLINK
                ),
            )
            for a, b in combinations(range(len(handles)), 2)
        }
        readings = MachineReadings(
            driver=driver,
            cuda_driver=_call(pynvml, "nvmlSystemGetCudaDriverVersion_v2"),
            nvml_version=_text(nvml_version) if nvml_version is not None else None,
            gpus=gpus,
            pairs=pairs,
        )
    if needs_topo_m(readings):
        with suppress(NvmlUnavailable):  # else those pairs stay unknown, and the interconnect check says so
            readings = replace(readings, topo_m=topo_m())
    return readings
