"""Where a run's files go: logs and caches in the results folder, temp files and sockets in a short scratch folder.

Unix socket paths are limited to 107 bytes and vLLM names its sockets ``<VLLM_RPC_BASE_PATH>/<uuid4>``; a results
folder deep inside a Buildkite checkout would overflow that. So TMPDIR and the RPC path go to a run-specific
folder under the system temp directory (recorded for ``afd-e2e cleanup``), everything else under ``--out``.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

RECORD_FILE = "run-record.json"


@dataclass(frozen=True)
class RunLayout:
    out_dir: Path
    scratch_root: Path

    @classmethod
    def for_run(cls, out_dir: Path, run_id: str) -> RunLayout:
        return cls(out_dir.resolve(), Path(tempfile.gettempdir()) / f"afd-e2e-{run_id}")

    @property
    def record_path(self) -> Path:
        return self.out_dir / RECORD_FILE

    @property
    def cache_dir(self) -> Path:
        return self.out_dir / ".cache"

    def log_dir(self, case_id: str) -> Path:
        return self.out_dir / "logs" / case_id

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.out_dir))

    def case_scratch(self, case_id: str) -> Path:
        return self.scratch_root / case_id
