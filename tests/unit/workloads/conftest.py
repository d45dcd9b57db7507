"""Fixtures of the workload tests."""

from __future__ import annotations

import pytest

from repo_paths import GSM8K_DIR


@pytest.fixture(scope="session")
def gsm8k_data():
    if not (GSM8K_DIR / "test.jsonl").is_file():
        pytest.fail(f"staged GSM8K data missing at {GSM8K_DIR}: set AFD_E2E_SHARED to the shared/ folder")
    from afd_e2e.phases.gsm8k_task import load_dataset

    return load_dataset(GSM8K_DIR)
