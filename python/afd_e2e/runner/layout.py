"""Where a run's files go: results and logs in the results folder, temp files and sockets in a short scratch
folder, compilation caches in a cache folder kept across runs.

The results folder holds only what is uploaded as artifacts. Unix socket paths are limited to 107 bytes and vLLM
names its sockets ``<VLLM_RPC_BASE_PATH>/<uuid4>``; a results folder deep inside a Buildkite checkout would overflow
that. So TMPDIR and the RPC path go to a run-specific folder under the system temp directory (recorded for
``afd-e2e cleanup``). vLLM's and torchinductor's caches go to ``$AFD_E2E_CACHE_DIR`` (default
``$XDG_CACHE_HOME/afd-e2e``, else ``~/.cache/afd-e2e``), so the next run on the agent reuses its compiled kernels.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

RECORD_FILE = "run-record.json"
CACHE_ENV = "AFD_E2E_CACHE_DIR"


def cache_root(env: Mapping[str, str]) -> Path:
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "afd-e2e"


@dataclass(frozen=True)
class RunLayout:
    out_dir: Path
    scratch_root: Path
    cache_dir: Path

    @classmethod
    def for_run(cls, out_dir: Path, run_id: str, env: Mapping[str, str] = os.environ) -> RunLayout:
        return cls(out_dir.resolve(), Path(tempfile.gettempdir()) / f"afd-e2e-{run_id}", cache_root(env))

    @property
    def record_path(self) -> Path:
        return self.out_dir / RECORD_FILE

    def log_dir(self, case_id: str) -> Path:
        return self.out_dir / "logs" / case_id

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.out_dir))

    def case_scratch(self, case_id: str) -> Path:
        return self.scratch_root / case_id
