"""Where a run's files go: the results folder holds results only; caches live in a cache folder kept across runs."""

from __future__ import annotations

from pathlib import Path

from afd_e2e.runner.layout import RunLayout


def test_caches_live_outside_the_results_folder(tmp_path: Path) -> None:
    layout = RunLayout.for_run(tmp_path / "out", "r1", env={"AFD_E2E_CACHE_DIR": str(tmp_path / "cache")})
    assert layout.cache_dir == tmp_path / "cache"
    assert not layout.cache_dir.is_relative_to(layout.out_dir)


def test_the_default_cache_follows_xdg(tmp_path: Path) -> None:
    layout = RunLayout.for_run(tmp_path / "out", "r1", env={"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert layout.cache_dir == tmp_path / "xdg" / "afd-e2e"
