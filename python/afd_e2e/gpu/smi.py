"""`nvidia-smi topo -m`: the fallback for device pairs NVML cannot place. One subprocess for all GPUs, never one per GPU.

The text is read as people paste it: through a terminal or a log (underline sequences kept, sometimes without their
ESC byte), with tabs turned into spaces, with NIC columns named ``NIC#`` or ``mlx5_#``. The header is found by its
column structure (``GPU0`` followed by more device columns, not by a cell), and a matrix that is incomplete or text
that is not a ``topo -m`` matrix at all is refused with a one-line error saying what it looks like.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from afd_e2e.errors import UsageError
from afd_e2e.gpu.nvml import NvmlUnavailable

# SGR sequences, also with the ESC byte already gone (``[4mGPU0 ... [0m`` in a log).
_ANSI = re.compile(r"\x1b?\[[0-9;]*m")
_GPU = re.compile(r"^GPU(\d+)$")
_CELL = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$")
TOPO_TIMEOUT_S = 10.0
FIX = "pass the text `nvidia-smi topo -m` prints on the NVIDIA machine (scripts/capture-gpu-fixtures records it)"


@dataclass(frozen=True)
class TopoMatrix:
    """The GPU-to-GPU cells of a ``topo -m`` matrix, keyed (i, j) with i < j: ``NV18``, ``PIX``, ... ``SYS``.

    ``shows_nvlink`` is False for ``topo -mp`` output: its legend has no ``NV#``, so a PCIe path there does not mean
    the pair lacks NVLink.
    """

    cells: dict[tuple[int, int], str]
    shows_nvlink: bool


def run_topo_m() -> str:
    """The text of ``nvidia-smi topo -m``; NvmlUnavailable when nvidia-smi is missing, fails or hangs."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise NvmlUnavailable("nvidia-smi is not on PATH")
    try:
        done = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=TOPO_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise NvmlUnavailable(f"nvidia-smi topo -m did not answer within {TOPO_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0:
        raise NvmlUnavailable(f"nvidia-smi topo -m exited {done.returncode}: {done.stderr.strip()[:200]}")
    return done.stdout


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _is_header(tokens: list[str]) -> bool:
    """``GPU0`` followed by another column name (a device or ``CPU Affinity``), not by a cell as a data row is."""
    return bool(tokens) and tokens[0] == "GPU0" and (len(tokens) == 1 or not _CELL.match(tokens[1]))


def _foreign(text: str) -> str | None:
    """What text from another tool looks like; None when it may be a ``topo -m`` matrix."""
    if not text.strip():
        return "empty text"
    if "ROCm System Management Interface" in text or "between two GPUs" in text:
        return "rocm-smi --showtopo output (AMD GPUs)"
    if "Status Ok" in text or "Chipset not supported" in text:
        return "nvidia-smi topo -p2p output (peer access, not links)"
    if "NVIDIA-SMI" in text and "Driver Version" in text:
        return "the nvidia-smi summary table"
    if "No devices were found" in text:
        return "nvidia-smi finding no GPU"
    return None


def _looks_like(text: str) -> str:
    foreign = _foreign(text)
    if foreign:
        return foreign
    first = next(line.strip() for line in text.splitlines() if line.strip())
    return f"text without a GPU0 column header (first line {first[:60]!r})"


def _legend_without_nvlink(lines: list[str]) -> bool:
    """``topo -mp`` ends its legend at ``PIX`` with no ``NV#`` entry; a paste cut before ``PIX`` says nothing."""
    legend = [line.strip() for line in lines]
    return any(line.startswith("PIX ") for line in legend) and not any(line.startswith("NV#") for line in legend)


def read_topo_m(text: str, source: str = "nvidia-smi topo -m") -> TopoMatrix:
    """The GPU pairs of a ``topo -m`` (or ``-mp``) matrix; UsageError for text that is not one or is incomplete.

    NIC columns (``NIC#``, ``mlx5_#``) and the affinity columns are skipped; ``SOC`` (older drivers) reads as ``SYS``;
    a cell outside the legend (``N/A``) is left out, so that pair stays unknown.
    """
    lines = [strip_ansi(line) for line in text.splitlines()]
    tokens = [line.split() for line in lines]
    header_at = next((i for i, row in enumerate(tokens) if _is_header(row)), None)
    rows: dict[int, list[str]] = {}
    for row in tokens[header_at + 1 :] if header_at is not None else ():
        label = _GPU.match(row[0]) if len(row) > 1 and _CELL.match(row[1]) else None
        if label is not None:
            rows.setdefault(int(label.group(1)), row[1:])
    if header_at is None or not rows or _foreign(text):
        raise UsageError(f"{source}: not `nvidia-smi topo -m` output: it looks like {_looks_like(text)}", FIX)
    header = tokens[header_at]
    columns = header[: header.index("CPU")] if "CPU" in header else header
    gpus = {int(m.group(1)): at for at, m in ((at, _GPU.match(c)) for at, c in enumerate(columns)) if m}
    missing = sorted(set(gpus) - set(rows))
    if missing:
        raise UsageError(f"{source}: incomplete `topo -m` matrix: no row for GPU{missing[0]}", FIX)
    cells: dict[tuple[int, int], str] = {}
    for a in sorted(gpus):
        if len(rows[a]) <= gpus[a] or rows[a][gpus[a]] != "X":
            raise UsageError(f"{source}: malformed `topo -m` matrix: GPU{a}'s row has no X on the diagonal", FIX)
        for b in sorted(gpus):
            if a < b and gpus[b] < len(rows[a]) and _CELL.match(rows[a][gpus[b]]):
                cell, mirror = rows[a][gpus[b]], rows[b][gpus[a]] if gpus[a] < len(rows[b]) else None
                if mirror != cell:
                    raise UsageError(
                        f"{source}: malformed `topo -m` matrix: GPU{a}-GPU{b} is {cell} but GPU{b}-GPU{a} is {mirror}",
                        FIX,
                    )
                cells[(a, b)] = "SYS" if cell == "SOC" else cell
    return TopoMatrix(cells, shows_nvlink=not _legend_without_nvlink(lines))
