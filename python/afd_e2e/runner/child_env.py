"""Where a child's environment and executable are decided (pure apart from looking for the executable)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from afd_e2e.errors import UsageError
from afd_e2e.plan.model import ProcessPlan


def child_environment(
    base: Mapping[str, str],
    process: ProcessPlan,
    *,
    scratch: Path,
    cache: Path,
    markers: Mapping[str, str],
) -> dict[str, str]:
    """``base`` minus the plan's stripped variables, plus its settings, the run-folder redirections and markers."""
    env = {key: value for key, value in base.items() if key not in process.env_unset}
    env.update(process.env_set)
    env.update(
        {
            "TMPDIR": str(scratch),
            "VLLM_RPC_BASE_PATH": str(scratch),
            "VLLM_CACHE_ROOT": str(cache / "vllm"),
            "XDG_CACHE_HOME": str(cache / "xdg"),
            "TORCHINDUCTOR_CACHE_DIR": str(cache / "torchinductor"),
        }
    )
    env.update(markers)
    return env


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
