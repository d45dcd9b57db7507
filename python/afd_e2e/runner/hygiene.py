"""Where a case's aftermath is checked: no process left, ports free, GPU memory at its baseline, no files left behind.

Each check is one results ``CheckRecord`` (status passed, failed or skipped). Checks that find
something of the run's own left behind also remove it, so the next case starts clean.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from afd_e2e.gpu.memory import NvmlUnavailable, read_device_memory
from afd_e2e.results.model import CheckRecord
from afd_e2e.results.status import Status
from afd_e2e.runner.teardown import TeardownOutcome, signal_tree
from afd_e2e.system.markers import MarkedProcess
from afd_e2e.system.ports import busy_ports

PORT_SETTLE_S = 2.0  # a port can lag its process's exit by a moment
GPU_SETTLE_S = 5.0  # memory returned 0.16 s after a CUDA process's exit on an H200 (reference/gpu.md)
GPU_SLACK_MIB = 16  # a CUDA context alone is hundreds of MiB; anything smaller is the driver's noise
SETTLE_POLL_S = 0.1
SHM_DIR = Path("/dev/shm")
SHM_PATTERN = "vllm_*"


def record(check: str, status: Status, detail: str) -> CheckRecord:
    return CheckRecord(check, status, detail)


def check_processes(find: Callable[[], list[MarkedProcess]]) -> CheckRecord:
    """Nothing carrying the case's markers may be alive after the teardown; what is, is killed and reported."""
    leftovers = find()
    if not leftovers:
        return record("processes", Status.PASSED, "no process carrying the markers is left")
    names = ", ".join(m.describe() for m in leftovers)
    signal_tree(leftovers, signal.SIGKILL)
    return record("processes", Status.FAILED, f"{len(leftovers)} outlived the teardown and were killed: {names}")


def check_forced_kill(outcome: TeardownOutcome, grace_s: float, *, cancelled: bool = False) -> CheckRecord:
    """A SIGKILL escalation fails the case, except during a cancel: vLLM ignores SIGTERM while it loads, and a
    cancelled job has seconds left, so there it is a warning labelled as the cancel's."""
    if outcome.forced:
        names = ", ".join(sorted(outcome.forced))
        if cancelled:
            return record(
                "forced_kill",
                Status.WARNED,
                f"cancel escalated to SIGKILL for {names}: still running {grace_s:.0f} s after SIGTERM "
                "(vLLM ignores SIGTERM while loading)",
            )
        return record(
            "forced_kill", Status.FAILED, f"SIGKILL needed for {names}: still running {grace_s:.0f} s after SIGTERM"
        )
    return record("forced_kill", Status.PASSED, f"everything stopped on SIGTERM in {outcome.seconds:.2f} s")


def check_ports(
    ports: Collection[int],
    host: str,
    *,
    settle_s: float = PORT_SETTLE_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> CheckRecord:
    """Every port free, within ``settle_s`` on ``clock`` (a port can lag its process's exit)."""
    deadline = clock() + settle_s
    while (busy := busy_ports(ports, host)) and clock() < deadline:
        sleep(SETTLE_POLL_S)
    if busy:
        held = ", ".join(f"{port} held by {who}" for port, who in busy.items())
        return record("ports", Status.FAILED, f"still in use: {held}")
    return record("ports", Status.PASSED, f"free: {', '.join(map(str, sorted(ports)))}")


@dataclass(frozen=True)
class GpuSnapshot:
    used_mib: Mapping[int, int] = field(default_factory=dict)
    pids: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    unavailable: str | None = None  # why nothing could be read (no NVML, or no GPU in the case)


NO_GPU = "runs on the CPU: no GPU memory to check"
NOTHING_HERE = "no process of this case on this agent: checked on the agents that run them"


def read_gpu_memory(devices: Iterable[int]) -> GpuSnapshot:
    devices = tuple(devices)
    if not devices:  # a CPU case: NVML's absence is no news
        return GpuSnapshot(unavailable=NO_GPU)
    try:
        readings = read_device_memory(devices)
    except NvmlUnavailable as exc:
        return GpuSnapshot(unavailable=str(exc))
    return GpuSnapshot({i: r.used_mib for i, r in readings.items()}, {i: r.compute_pids for i, r in readings.items()})


def check_gpu_memory(
    baseline: GpuSnapshot,
    *,
    read: Callable[[Iterable[int]], GpuSnapshot] = read_gpu_memory,
    settle_s: float = GPU_SETTLE_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> CheckRecord:
    """Every device back within GPU_SLACK_MIB of the memory it used before the case (as nvidia-smi counts it),
    within ``settle_s`` on ``clock``."""
    if baseline.unavailable:
        return record("gpu_memory", Status.SKIPPED, baseline.unavailable)
    deadline = clock() + settle_s
    while True:
        now = read(baseline.used_mib)
        if now.unavailable:
            return record("gpu_memory", Status.FAILED, f"could not read GPU memory after the case: {now.unavailable}")
        over = {i: used for i, used in now.used_mib.items() if used > baseline.used_mib[i] + GPU_SLACK_MIB}
        if not over or clock() >= deadline:
            break
        sleep(SETTLE_POLL_S)
    if over:
        detail = "; ".join(
            f"device {i}: {used} MiB used, {baseline.used_mib[i]} MiB before (pids {list(now.pids.get(i, ()))})"
            for i, used in over.items()
        )
        return record("gpu_memory", Status.FAILED, detail)
    summary = ", ".join(f"device {i}: {used} MiB" for i, used in now.used_mib.items())
    return record("gpu_memory", Status.PASSED, f"back to baseline: {summary}")


def shm_entries(shm_dir: Path = SHM_DIR) -> set[str]:
    return {p.name for p in shm_dir.glob(SHM_PATTERN)}


def paths_in_use(paths: Collection[Path]) -> set[Path]:
    """Which of ``paths`` a live process has open or mapped (scans /proc/*/fd and /proc/*/maps)."""
    wanted = {str(p): p for p in paths}
    used: set[Path] = set()
    if not wanted:
        return used
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with suppress(OSError):
                    if (target := os.readlink(fd)) in wanted:
                        used.add(wanted[target])
        with suppress(OSError):
            for line in (proc / "maps").read_text().splitlines():
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5] in wanted:
                    used.add(wanted[parts[5]])
    return used


def remove_leftover_files(scratch: Path, shm_before: Collection[str], *, shm_dir: Path = SHM_DIR) -> CheckRecord:
    """Remove the case's scratch folder (temp files, sockets) and the ``vllm_*`` shared-memory entries it created.

    An entry that appeared during the case but is still open in a live process belongs to someone else (another
    vLLM on this machine) and is left alone.
    """
    removed: list[str] = []
    failed: list[str] = []
    if scratch.exists():
        files = [p for p in scratch.rglob("*") if not p.is_dir()]
        sockets = sum(1 for p in files if p.is_socket())
        try:
            shutil.rmtree(scratch)
        except OSError as exc:
            failed.append(f"{scratch} ({exc})")
        if files:
            removed.append(f"{len(files)} files ({sockets} sockets) in {scratch}")
    new = {shm_dir / name for name in shm_entries(shm_dir) - set(shm_before)}
    held = paths_in_use(new)
    for path in sorted(new - held):
        try:
            path.unlink()
            removed.append(str(path))
        except OSError as exc:
            failed.append(f"{path} ({exc.strerror})")
    if failed:
        return record("leftover_files", Status.FAILED, f"could not remove: {', '.join(failed)}")
    detail = f"removed {'; '.join(removed)}" if removed else "nothing left behind"
    if held:
        detail += f"; not ours (open in other processes): {', '.join(sorted(map(str, held)))}"
    return record("leftover_files", Status.PASSED, detail)
