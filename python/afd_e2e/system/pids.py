"""How a process is named in messages: ``pid N (name)``, as ports and GPU checks report holders."""

from __future__ import annotations

import psutil


def describe_pid(pid: int) -> str:
    """``pid 1234 (python)``; a pid NVML reports from another container's PID namespace cannot be named here."""
    try:
        return f"pid {pid} ({psutil.Process(pid).name()})"
    except psutil.NoSuchProcess:
        return f"pid {pid} (not visible here: another container or PID namespace?)"
    except psutil.Error:
        return f"pid {pid}"
