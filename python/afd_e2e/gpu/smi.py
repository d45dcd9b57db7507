"""`nvidia-smi topo -m`: the fallback for device pairs NVML cannot place. One subprocess for all GPUs, never one per GPU."""

from __future__ import annotations

import re
import shutil
import subprocess

from afd_e2e.gpu.nvml import NvmlUnavailable

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_DEVICE = re.compile(r"^(GPU|NIC)\d+$")
_GPU = re.compile(r"^GPU(\d+)$")
_CELL = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$")
TOPO_TIMEOUT_S = 10.0


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


def parse_topo_m(text: str) -> dict[tuple[int, int], str]:
    """GPU-to-GPU cells of a ``topo -m`` matrix, keyed (i, j) with i < j: ``NV18``, ``PIX``, ... ``SYS``.

    NIC columns and the affinity columns are skipped; ``SOC`` (older drivers' name) reads as ``SYS``.
    """
    lines = [_ANSI.sub("", line) for line in text.splitlines()]
    header = next((line.split() for line in lines if "GPU0" in line.split()), None)
    if header is None:
        return {}
    columns = []
    for token in header:
        if not _DEVICE.match(token):
            break
        columns.append(token)
    cells: dict[tuple[int, int], str] = {}
    for line in lines:
        tokens = line.split()
        row = _GPU.match(tokens[0]) if tokens else None
        if row is None or len(tokens) <= len(columns):
            continue
        a = int(row.group(1))
        for column, cell in zip(columns, tokens[1 : 1 + len(columns)], strict=True):
            col = _GPU.match(column)
            if col is None or not _CELL.match(cell):
                continue
            b = int(col.group(1))
            if a < b:
                cells[(a, b)] = "SYS" if cell == "SOC" else cell
    return cells
