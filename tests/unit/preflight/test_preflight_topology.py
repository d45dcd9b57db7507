"""Pair links from NVML and from `nvidia-smi topo -m`, on the real 2x H200 capture and the simulated 8-GPU readings."""

from __future__ import annotations

from dataclasses import replace

from preflight_fixtures import GPU_FIXTURES, H200X2, h200x2_readings

from afd_e2e.gpu.readings import GpuReading, MachineReadings, NvLinkReading, PairReading, load_readings
from afd_e2e.gpu.smi import read_topo_m
from afd_e2e.gpu.topology import NVLINK, PCIE, UNKNOWN, link_matrix, needs_topo_m


def labels(links):
    return {pair: link.label for pair, link in links.items()}


def text(name: str) -> str:
    return (GPU_FIXTURES / name).read_text(encoding="utf-8")


# The simulated PCIe machine's layout, written by hand from topo/pcie8-pix-pxb-sys-mlx5.txt (a real capture).
PCIE8 = {
    **{pair: "PIX" for pair in [(0, 1), (2, 3), (4, 5), (6, 7)]},
    **{pair: "PXB" for pair in [(0, 2), (0, 3), (1, 2), (1, 3), (4, 6), (4, 7), (5, 6), (5, 7)]},
    **{(a, b): "SYS" for a in range(4) for b in range(4, 8)},
}


def test_the_captured_topo_m_parses_to_one_nv18_pair():
    assert read_topo_m((H200X2 / "topo-m.txt").read_text(encoding="utf-8")).cells == {(0, 1): "NV18"}


def test_nvml_finds_the_18_nvlinks_topo_m_shows_on_the_h200_pair():
    links = link_matrix(h200x2_readings())
    assert links[(0, 1)].kind == NVLINK and links[(0, 1)].nvlinks == 18 and links[(0, 1)].source == "nvml"
    assert labels(links) == {(0, 1): "NV18"}


def test_nvml_ancestors_and_the_topo_m_fallback_give_the_same_8_gpu_matrix():
    from_nvml = link_matrix(load_readings(GPU_FIXTURES / "rtx6000x8-pcie.json"))
    from_smi = link_matrix(load_readings(GPU_FIXTURES / "rtx6000x8-pcie-smi-fallback.json"))
    assert labels(from_nvml) == labels(from_smi) == PCIE8
    assert {ln.source for ln in from_nvml.values()} == {"nvml"}
    assert {ln.source for ln in from_smi.values()} == {"nvidia-smi topo -m"}
    assert {ln.kind for ln in from_smi.values()} == {PCIE}


def test_nvswitch_links_reach_every_gpu_as_topo_m_shows():
    readings = load_readings(GPU_FIXTURES / "h200x8-nvswitch.json")
    assert set(labels(link_matrix(readings)).values()) == {"NV18"} and len(link_matrix(readings)) == 28
    unknown_p2p = replace(readings, pairs={pair: replace(p, p2p_nvlink=None) for pair, p in readings.pairs.items()})
    assert set(labels(link_matrix(unknown_p2p)).values()) == {"NV18"}


def test_nvlink_that_p2p_cannot_use_is_not_nvlink():
    readings = h200x2_readings()
    broken = replace(readings, pairs={(0, 1): PairReading(common_ancestor=30, p2p_nvlink=5)})
    assert labels(link_matrix(broken)) == {(0, 1): "PHB"}


def _gpu(index: int, peers: list[int]) -> GpuReading:
    links = tuple(NvLinkReading(n, True, f"0000:{0x10 + p:02x}:00.0", 0) for n, p in enumerate(peers))
    return GpuReading(
        index, "Tesla V100-SXM2-32GB", f"GPU-{index}", f"0000:{0x10 + index:02x}:00.0", 1, 0, 0, links, ()
    )


def test_direct_links_count_per_peer_when_nvml_names_the_far_end():
    # A partial mesh: GPU0 has two links to GPU1 and one to GPU2; GPU3 hangs off PCIe only.
    gpus = (_gpu(0, [1, 1, 2]), _gpu(1, [0, 0]), _gpu(2, [0]), _gpu(3, []))
    pairs = {(a, b): PairReading(50, 0 if {a, b} in ({0, 1}, {0, 2}) else 5) for a in range(4) for b in range(a + 1, 4)}
    links = labels(link_matrix(MachineReadings("535.0", 12020, None, gpus, pairs)))
    assert links == {(0, 1): "NV2", (0, 2): "NV1", (0, 3): "SYS", (1, 2): "SYS", (1, 3): "SYS", (2, 3): "SYS"}


def test_a_pair_neither_nvml_nor_topo_m_places_is_unknown():
    readings = replace(load_readings(GPU_FIXTURES / "rtx6000x8-pcie.json"), pairs={})
    assert needs_topo_m(readings)
    links = link_matrix(readings)
    assert {ln.kind for ln in links.values()} == {UNKNOWN} and links[(0, 1)].label == "?"
    assert not needs_topo_m(load_readings(GPU_FIXTURES / "rtx6000x8-pcie.json"))


def test_topo_mp_text_leaves_pairs_unknown_not_pcie():
    readings = replace(load_readings(GPU_FIXTURES / "rtx6000x8-pcie.json"), pairs={})
    mp = replace(readings, gpus=readings.gpus[:3], topo_m=text("topo/p100x3-topo-mp.txt"))
    links = link_matrix(mp)
    assert {ln.kind for ln in links.values()} == {UNKNOWN}
    assert labels(links) == {(0, 1): "SYS?", (0, 2): "SYS?", (1, 2): "NODE?"}
    assert "cannot show NVLink" in links[(0, 1)].source


def test_refused_topo_text_leaves_every_pair_unknown_with_the_reason():
    readings = replace(load_readings(GPU_FIXTURES / "rtx6000x8-pcie.json"), pairs={})
    refused = replace(readings, topo_m=text("topo/rocm-smi-showtopo-4gpu.txt"))
    links = link_matrix(refused)
    assert {ln.kind for ln in links.values()} == {UNKNOWN}
    assert "looks like rocm-smi" in links[(0, 1)].source


def test_ansi_remnants_without_the_escape_byte_still_give_the_pairs():
    readings = replace(load_readings(GPU_FIXTURES / "rtx6000x8-pcie.json"), pairs={})
    remnant = replace(readings, gpus=readings.gpus[:2], topo_m=text("topo/h200x2-ansi-remnants.txt"))
    assert {pair: (ln.kind, ln.label) for pair, ln in link_matrix(remnant).items()} == {(0, 1): (NVLINK, "NV18")}
