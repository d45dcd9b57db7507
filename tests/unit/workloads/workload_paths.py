"""Paths the workload tests share: the repository, its fixtures, and ``../shared`` (staged GSM8K data)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures"
# CI lays shared/ beside the clone; a checkout elsewhere points AFD_E2E_SHARED at it.
SHARED = Path(os.environ.get("AFD_E2E_SHARED", REPO.parent / "shared"))
GSM8K_DIR = SHARED / "datasets" / "gsm8k"
