"""How each pair of GPUs is connected, in `nvidia-smi topo -m` notation: ``NV#`` (# bonded NVLinks) or the PCIe path.

Pure: works on MachineReadings. NVML first: NVLinks whose far end is the other GPU, or an NVSwitch both reach, count
towards the pair; where nvidia-ml-py cannot name a link's far end (older versions lack the remote PCI call), an
active link counts when NVML says NVLink P2P works between the two, which is exact on two GPUs and on NVSwitch
systems. NVML's P2P status is the last word: NVLink that CUDA cannot use (e.g. fabric manager down) is not NVLink.
Without NVLink, the PCIe common ancestor gives PIX/PXB/PHB/NODE/SYS. Pairs NVML cannot place come from
``nvidia-smi topo -m`` when the probe had to read it. A pair neither places is UNKNOWN, never PCIe: also a pair that
``topo -mp`` shows (a PCIe path, but that form cannot show NVLink) and every pair when the text was refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from afd_e2e.errors import UsageError
from afd_e2e.gpu.readings import MachineReadings
from afd_e2e.gpu.smi import TopoMatrix, read_topo_m

NVLINK, PCIE, UNKNOWN = "nvlink", "pcie", "unknown"
P2P_OK = 0
REMOTE_SWITCH = 2
# NVML_TOPOLOGY_* levels; 0 (INTERNAL: two GPUs on one board) is at most one bridge apart, as PIX.
PCIE_LEVELS = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


@dataclass(frozen=True)
class Link:
    kind: str  # NVLINK, PCIE or UNKNOWN
    label: str  # NV18, PIX, PXB, PHB, NODE, SYS, or "?" when unknown
    nvlinks: int
    source: str  # "nvml", "nvidia-smi topo -m" or "none"


def _nvlink_count(readings: MachineReadings, a: int, b: int) -> int:
    pair = readings.pair(a, b)
    if pair.p2p_nvlink is not None and pair.p2p_nvlink != P2P_OK:
        return 0
    gpu_bus_ids = {gpu.bus_id for gpu in readings.gpus}
    active = [ln for ln in readings.gpus[a].nvlinks if ln.active]
    direct = sum(1 for ln in active if ln.remote_bus_id == readings.gpus[b].bus_id)
    # Links to an NVSwitch, or whose far end nvidia-ml-py cannot name: they reach b when NVML says NVLink P2P
    # works, or (status unknown) when both GPUs hang off NVSwitches.
    fabric = [ln for ln in active if ln.remote_bus_id not in gpu_bus_ids]
    b_on_switch = any(ln.active and ln.remote_type == REMOTE_SWITCH for ln in readings.gpus[b].nvlinks)
    if pair.p2p_nvlink == P2P_OK:
        return direct + len(fabric)
    return direct + (sum(1 for ln in fabric if ln.remote_type == REMOTE_SWITCH) if b_on_switch else 0)


def nvml_link(readings: MachineReadings, a: int, b: int) -> Link | None:
    """The pair's link from NVML alone; None when NVML cannot place it."""
    pair = readings.pair(a, b)
    count = _nvlink_count(readings, a, b)
    if count:
        return Link(NVLINK, f"NV{count}", count, "nvml")
    if pair.common_ancestor in PCIE_LEVELS:
        return Link(PCIE, PCIE_LEVELS[pair.common_ancestor], 0, "nvml")
    return None


def needs_topo_m(readings: MachineReadings) -> bool:
    return any(nvml_link(readings, a, b) is None for a, b in combinations(range(len(readings.gpus)), 2))


def _read_smi(readings: MachineReadings) -> tuple[TopoMatrix | None, str]:
    """The recorded ``topo -m`` matrix, or None and why it cannot place pairs."""
    if not readings.topo_m:
        return None, "none"
    try:
        return read_topo_m(readings.topo_m), ""
    except UsageError as exc:
        return None, exc.problem


def link_matrix(readings: MachineReadings) -> dict[tuple[int, int], Link]:
    """The link of every GPU pair (i, j), i < j, over the whole machine."""
    smi, why_not = _read_smi(readings)
    links = {}
    for a, b in combinations(range(len(readings.gpus)), 2):
        link = nvml_link(readings, a, b)
        label = smi.cells.get((a, b)) if smi is not None and link is None else None
        if label is not None and smi is not None and not smi.shows_nvlink:
            link = Link(UNKNOWN, f"{label}?", 0, "nvidia-smi topo -mp (a PCIe path; this form cannot show NVLink)")
        elif label is not None:
            count = int(label[2:]) if label.startswith("NV") else 0
            link = Link(NVLINK if count else PCIE, label, count, "nvidia-smi topo -m")
        links[(a, b)] = link or Link(UNKNOWN, "?", 0, why_not or "nvidia-smi topo -m has no cell for this pair")
    return links


def pair_link(links: dict[tuple[int, int], Link], a: int, b: int) -> Link:
    return links[(min(a, b), max(a, b))]


def render_matrix(links: dict[tuple[int, int], Link], devices: list[int]) -> list[list[str]]:
    """Rows like `nvidia-smi topo -m`: a header row, then one row per device with ``X`` on the diagonal."""
    rows = [["", *(f"GPU{d}" for d in devices)]]
    for a in devices:
        rows.append([f"GPU{a}", *("X" if a == b else pair_link(links, a, b).label for b in devices)])
    return rows
