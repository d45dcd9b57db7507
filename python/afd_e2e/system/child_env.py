"""Where a child's environment is decided (pure): the servers' and the harness's own clients' (bench, py-spy).

No child inherits the agent's credentials: a vLLM process loads model code, and the job's
``BUILDKITE_AGENT_ACCESS_TOKEN`` or an API token (``BUILDKITE_API_TOKEN``, ``HF_TOKEN``) has no business there. A
variable the plan sets itself is kept: the profile asked for it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from afd_e2e.plan.model import ProcessPlan  # system sits below plan: the annotation only


# A name that ends in a credential word (TOKENIZERS_PARALLELISM does not).
CREDENTIAL_NAME = re.compile(
    r"(?:^|_)(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIALS?)$", re.IGNORECASE
)


def without_credentials(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without the variables whose names say they hold a credential."""
    return {key: value for key, value in env.items() if not CREDENTIAL_NAME.search(key)}


def client_environment(base: Mapping[str, str], *, markers: Mapping[str, str]) -> dict[str, str]:
    """A process the harness starts besides the servers (``vllm bench serve``, py-spy): the agent's environment
    without credentials, with the run's markers so ``afd-e2e cleanup`` finds it."""
    return {**without_credentials(base), **markers}


def child_environment(
    base: Mapping[str, str],
    process: ProcessPlan,
    *,
    scratch: Path,
    cache: Path,
    markers: Mapping[str, str],
    out_dir: Path | None = None,
) -> dict[str, str]:
    """``base`` minus credentials and the plan's stripped variables, plus its settings (folders the plan names
    inside the results folder made absolute under ``out_dir``), the run-folder redirections and markers."""
    env = {key: value for key, value in without_credentials(base).items() if key not in process.env_unset}
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
