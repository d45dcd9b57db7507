"""Unit tier: the install check and cache of ``afd_e2e.bisect.install`` over hand-made folders laid out as
``pip install --target`` leaves them (a dist-info with METADATA and direct_url.json): the commit recorded must be
the one asked and a Python with the folder first on PYTHONPATH must load the package from it; a commit built once
(or refused once) is not built again. (The real pip build is exercised by tests/engine/test_bisect_cpu_vllm.py.)"""

from __future__ import annotations

import json
from pathlib import Path

from afd_e2e.bisect.install import MARKER, Installed, NotInstalled, check_installed, install_at, pip_error
from repo_paths import FIXTURES

SHA = "1" * 40


def _target(folder: Path, commit: str) -> Path:
    info = folder / "afd_e2e_probe_pkg-0.1.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: afd-e2e-probe-pkg\nVersion: 0.1.3\n")
    vcs = {"url": "file:///repo", "vcs_info": {"vcs": "git", "commit_id": commit}}
    (info / "direct_url.json").write_text(json.dumps(vcs))
    return folder


def test_the_recorded_commit_and_the_loaded_copy_are_checked(tmp_path: Path) -> None:
    assert check_installed(_target(tmp_path / "right", SHA), SHA) == ("afd-e2e-probe-pkg", "0.1.3")
    wrong = check_installed(_target(tmp_path / "wrong", "2" * 40), SHA)
    assert wrong == f"afd-e2e-probe-pkg in {tmp_path / 'wrong'} records commit {'2' * 40}, not {SHA}"
    (tmp_path / "empty").mkdir()
    assert check_installed(tmp_path / "empty", SHA) == f"no distribution installed from git in {tmp_path / 'empty'}"


def test_a_commit_is_built_once_and_a_refused_one_is_remembered(tmp_path: Path) -> None:
    packages = tmp_path / "cache" / "packages"
    done = _target(packages / SHA, SHA)
    (done / MARKER).write_text(json.dumps({"name": "afd-e2e-probe-pkg", "version": "0.1.3", "commit": SHA}))
    found = install_at(tmp_path / "no-repo", SHA, tmp_path / "cache", cancelled=lambda: False)
    assert isinstance(found, Installed) and found.cached and found.path == done
    (packages / f"{'3' * 40}.failed").write_text("pip install failed (exit 1): error: no such package folder\n")
    refused = install_at(tmp_path / "no-repo", "3" * 40, tmp_path / "cache", cancelled=lambda: False)
    assert (
        isinstance(refused, NotInstalled)
        and refused.reason == "pip install failed (exit 1): error: no such package folder"
    )


def test_a_failed_build_is_named_by_the_backends_own_error_line() -> None:
    log = (FIXTURES / "bisect" / "pip-install-failed.log").read_text()
    assert pip_error(log) == "error: package directory 'afd_e2e_bisect_plugin_moved' does not exist"
