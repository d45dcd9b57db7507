"""Where tests find the repository, its fixtures and ``../shared`` (read-only references, datasets, schema).

CI lays shared/ beside the clone; a checkout elsewhere (e.g. a git worktree) points AFD_E2E_SHARED at it.
On the path through pytest's ``pythonpath = ["tests"]``.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
SHARED = Path(os.environ.get("AFD_E2E_SHARED") or REPO.parent / "shared").resolve()
GSM8K_DIR = SHARED / "datasets" / "gsm8k"
