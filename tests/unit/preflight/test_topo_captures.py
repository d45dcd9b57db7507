"""`nvidia-smi topo -m` read off real public captures (tests/fixtures/gpu/topo/SOURCES.md says where each is from).

Every expected matrix below was written by hand from the capture: row ``GPUi`` lists the cells to GPUi+1 .. GPUn-1.
"""

from __future__ import annotations

import pytest
from preflight_fixtures import GPU_FIXTURES

from afd_e2e.errors import UsageError
from afd_e2e.gpu.smi import read_topo_m

TOPO = GPU_FIXTURES / "topo"


def upper(*rows: str) -> dict[tuple[int, int], str]:
    return {(a, a + 1 + k): cell for a, row in enumerate(rows) for k, cell in enumerate(row.split())}


def every_pair(gpus: int, cell: str) -> dict[tuple[int, int], str]:
    return {(a, b): cell for a in range(gpus) for b in range(a + 1, gpus)}


CAPTURES = {
    "h100x8-nvswitch-9nic.txt": every_pair(8, "NV18"),
    "a100x8-nvswitch-17nic-spaces.txt": every_pair(8, "NV12"),
    "dgx1-v100x8-hybrid-cube-mesh.txt": upper(
        "NV1 NV1 NV2 NV2 SYS SYS SYS",
        "NV2 NV1 SYS NV2 SYS SYS",
        "NV2 SYS SYS NV1 SYS",
        "SYS SYS SYS NV1",
        "NV1 NV1 NV2",
        "NV2 NV1",
        "NV2",
    ),
    "pcie8-pix-pxb-sys-mlx5.txt": upper(
        "PIX PXB PXB SYS SYS SYS SYS",
        "PXB PXB SYS SYS SYS SYS",
        "PIX SYS SYS SYS SYS",
        "SYS SYS SYS SYS",
        "PIX PXB PXB",
        "PXB PXB",
        "PIX",
    ),
    "rtx4090x8-sys-2nic.txt": every_pair(8, "SYS"),
    "rtx4090x5-sys-phb-node-spaces.txt": upper("SYS SYS SYS SYS", "PHB NODE NODE", "NODE NODE", "PHB"),
    "a10x4-sys-2nic-spaces.txt": every_pair(4, "SYS"),
    "rtx5090x2-phb.txt": {(0, 1): "PHB"},
    "gtx1080tix2-phb-spaces.txt": {(0, 1): "PHB"},
    "h200x2-ansi-remnants.txt": {(0, 1): "NV18"},
}


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_every_gpu_pair_of_a_real_capture_is_read_as_written(name):
    matrix = read_topo_m((TOPO / name).read_text(encoding="utf-8"), name)
    assert matrix.cells == CAPTURES[name]
    assert matrix.shows_nvlink


def test_the_real_h200_capture_with_its_escape_bytes_reads_like_its_remnant_copy():
    captured = (GPU_FIXTURES / "h200x2-captured" / "topo-m.txt").read_text(encoding="utf-8")
    assert "\x1b[4m" in captured
    assert read_topo_m(captured).cells == {(0, 1): "NV18"}


def test_topo_mp_is_recognised_as_unable_to_show_nvlink():
    matrix = read_topo_m((TOPO / "p100x3-topo-mp.txt").read_text(encoding="utf-8"))
    assert matrix.cells == upper("SYS SYS", "NODE")
    assert not matrix.shows_nvlink


def test_rocm_smi_showtopo_is_refused_naming_what_it_is():
    with pytest.raises(UsageError) as refused:
        read_topo_m((TOPO / "rocm-smi-showtopo-4gpu.txt").read_text(encoding="utf-8"), "rocm.txt")
    assert (
        refused.value.problem
        == "rocm.txt: not `nvidia-smi topo -m` output: it looks like rocm-smi --showtopo output (AMD GPUs)"
    )
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("text", "looks_like"),
    [
        ("", "empty text"),
        ("No devices were found\n", "nvidia-smi finding no GPU"),
        (" \tGPU0\tGPU1\t\n GPU0\tX\tOK\t\n GPU1\tOK\tX\t\n\nLegend:\n  OK   = Status Ok\n", "topo -p2p output"),
        ("hello\nworld\n", "first line 'hello'"),
    ],
)
def test_text_that_is_not_a_topo_matrix_is_refused(text, looks_like):
    with pytest.raises(UsageError, match="not `nvidia-smi topo -m` output") as refused:
        read_topo_m(text)
    assert looks_like in refused.value.problem


def test_a_cut_or_inconsistent_matrix_is_refused_not_read_as_fewer_pairs():
    lines = (TOPO / "dgx1-v100x8-hybrid-cube-mesh.txt").read_text(encoding="utf-8").splitlines()
    with pytest.raises(UsageError, match="no row for GPU5"):
        read_topo_m("\n".join(lines[:6]))
    asymmetric = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-7\nGPU1\tPIX\t X \t0-7\n"
    with pytest.raises(UsageError, match="GPU0-GPU1 is NV4 but GPU1-GPU0 is PIX"):
        read_topo_m(asymmetric)


def test_older_drivers_soc_reads_as_sys():
    old = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tSOC\t0-7\nGPU1\tSOC\t X \t0-7\n"
    assert read_topo_m(old).cells == {(0, 1): "SYS"}
