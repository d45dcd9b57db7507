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
    out_dir: Path | None = None,
) -> dict[str, str]:
    """``base`` minus the plan's stripped variables, plus its settings (folders the plan names inside the results
    folder made absolute under ``out_dir``), the run-folder redirections and markers."""
    env = {key: value for key, value in base.items() if key not in process.env_unset}
    env.update(process.env_set)
    if process.out_dir_env:
        assert out_dir is not None, f"{process.name} names folders in the results folder: pass out_dir"
        env.update({key: str(out_dir / relative) for key, relative in process.out_dir_env.items()})
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
