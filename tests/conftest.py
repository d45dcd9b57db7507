"""The suite's tiers, checked at collection, and the count of real vLLM servers the run started.

Every test lives in exactly one tier, by folder (docs/design.md, "Test tiers"):

- ``tests/unit``: pure code and fast process tests with stand-ins; needs no vLLM;
- ``tests/engine``: needs the real CPU vLLM (scripts/install-cpu-vllm); marked ``engine``;
- ``tests/gpu``: needs NVIDIA GPUs and skips without them; marked ``gpu``.

A test file outside these folders fails collection, naming the fix, so no test runs in no tier. At the end of a run
that collected engine or GPU tests, the number of ``vllm serve`` processes started while it ran is printed: CI's
time goes mostly to server launches, so the count is watched (``.ci/run`` prints it in its closing table).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from afd_e2e.phases import rendering
from launch_counter import LaunchCounter

TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "engine", "gpu")

rendering.install_renderers()  # the built-in phases and their renderers, as the commands that run or render install them


def tier_of(path: Path) -> str | None:
    """The tier a test file belongs to: the first folder under tests/, when it is a tier's."""
    try:
        first = Path(path).resolve().relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return None
    return first if first in TIERS else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    outside = sorted({str(item.path) for item in items if tier_of(item.path) is None})
    if outside:
        raise pytest.UsageError(
            f"tests in no tier: {', '.join(outside)}; fix: move each under tests/unit, tests/engine or tests/gpu"
        )
    for item in items:
        tier = tier_of(item.path)
        if tier != "unit":
            item.add_marker(getattr(pytest.mark, tier))
        wrong = [t for t in TIERS if t != tier and t != "unit" and item.get_closest_marker(t) is not None]
        if wrong:
            raise pytest.UsageError(f"{item.nodeid} is in tests/{tier} but marked {wrong[0]}; fix: move it or unmark")
    if any(tier_of(item.path) != "unit" for item in items):
        config.pluginmanager.register(LaunchCounter(), "afd-e2e-launch-counter")
