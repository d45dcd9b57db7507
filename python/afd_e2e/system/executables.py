"""Where executables (``vllm``) are found: the runner, the bench and preflight resolve them the same way."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from afd_e2e.errors import UsageError


def resolve_executable(name: str, *, python: str | None = None, search_path: str | None = None) -> str:
    """A bare name next to this Python (same virtual environment) first, else on PATH; paths are kept as given."""
    if os.sep in name:
        if not os.access(name, os.X_OK):
            raise UsageError(f"executable {name} does not exist or is not executable", "fix engine.executable")
        return name
    beside = Path(python or sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(name, path=search_path)
    if not found:
        raise UsageError(
            f"no {name!r} executable next to {python or sys.executable} or on PATH",
            "install vLLM into this environment (scripts/install-cpu-vllm on the CPU) or set engine.executable",
        )
    return found
