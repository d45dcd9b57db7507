"""Where a child's environment is decided (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

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
