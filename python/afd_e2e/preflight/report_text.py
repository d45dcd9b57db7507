"""The preflight report as text: one line per check, the fix under each failure, then the GPU link matrix."""

from __future__ import annotations

from afd_e2e.preflight.checks import FAIL, PASS, SKIP, WARN, PreflightReport

LABELS = {PASS: "PASS", FAIL: "FAIL", WARN: "WARN", SKIP: "SKIP"}


def format_table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]


def render_report(report: PreflightReport) -> str:
    devices = ",".join(map(str, report.devices)) or "cpu"
    verdict = "FITS" if report.fits else "DOES NOT FIT"
    counts = ", ".join(f"{report.count(s)} {s}" for s in (PASS, FAIL, WARN, SKIP) if report.count(s))
    lines = [f"preflight {report.profile} on devices {devices}: {verdict} ({counts})"]
    name_width = max(len(check.name) for check in report.checks)
    for check in report.checks:
        wanted = f"  [wanted: {check.wanted}]" if check.wanted and check.status in (FAIL, WARN) else ""
        lines.append(
            f"  {LABELS.get(check.status, str(check.status).upper()):4}  {check.name.ljust(name_width)}  {check.measured}{wanted}"
        )
        if check.fix and check.status in (FAIL, WARN):
            lines.append(f"  {'':4}  {'':{name_width}}  fix: {check.fix}")
    if report.hardware:
        hw = report.hardware
        lines.append(f"hardware: driver {hw.driver}, CUDA {hw.cuda}, {len(hw.gpus)} GPUs")
        for gpu in hw.gpus:
            used = gpu.memory_used_mib
            used_text = f"{used} MiB used" if used is not None else f"{gpu.memory_used_v1_mib} MiB used incl. reserved"
            pids = f", pids {' '.join(map(str, gpu.compute_pids))}" if gpu.compute_pids else ""
            lines.append(
                f"  GPU{gpu.index}  {gpu.name}  {gpu.memory_total_mib} MiB, {used_text}{pids}  {gpu.bus_id}  {gpu.uuid}"
            )
        if len(hw.gpus) > 1:
            lines.append(
                "GPU links (nvidia-smi topo -m notation: NV# = # bonded NVLinks; PIX/PXB/PHB/NODE/SYS = PCIe path):"
            )
            lines += ["  " + row for row in format_table(hw.matrix)]
    return "\n".join(lines) + "\n"
