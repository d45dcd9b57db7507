"""Unit tier: install-agent installs only what it is pointed at. No package named afd-e2e is published on a package
index, so a bare name resolved there would run whoever registered it on every agent (dependency confusion): it is
refused unless --index-url names the index, and so is a git URL not pinned to a commit or a tag. Refusals come
before anything is made or installed; both entries (scripts/install-agent from a checkout, `afd-e2e install-agent`
after an install) are the same command. The installs themselves are tests/engine/test_install_agent.py and
tests/engine/test_wheelhouse.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from afd_e2e.cli import build_parser
from afd_e2e.commands.install_agent import Refused, check_source, pip_args, pip_env
from repo_paths import REPO

COMMIT = "934ccaf288eb2d40b0b5241af98df1dce31bee9f"


@pytest.mark.parametrize(
    "source",
    [
        f"git+https://github.com/vllm-project/afd-e2e@{COMMIT}",
        "git+https://github.com/vllm-project/afd-e2e@v0.1.0",
        "git+ssh://git@github.com/vllm-project/afd-e2e.git@v0.1.0#egg=afd-e2e",
        "afd-e2e @ git+https://github.com/vllm-project/afd-e2e@v0.1.0",
    ],
)
def test_a_git_url_pinned_to_a_commit_or_a_tag_is_taken(source):
    assert check_source(source, None, None) == source


@pytest.mark.parametrize(
    "source",
    [
        "git+https://github.com/vllm-project/afd-e2e",
        "git+https://github.com/vllm-project/afd-e2e@main",
        "git+ssh://git@github.com/vllm-project/afd-e2e.git",
    ],
)
def test_a_git_url_not_pinned_is_refused(source):
    with pytest.raises(Refused, match=r"is not pinned to a commit or a tag \(fix: end the URL with @<40-hex commit>"):
        check_source(source, None, None)


@pytest.mark.parametrize("source", ["afd-e2e", "afd-e2e==0.1.0", None])
def test_a_bare_name_is_refused_without_an_explicit_index(source):
    with pytest.raises(Refused, match="fix: pass --wheels DIR"):
        check_source(source, None, None)


def test_a_bare_name_from_an_index_named_explicitly_is_taken():
    assert check_source("afd-e2e==0.1.0", None, "https://pypi.internal/simple") == "afd-e2e==0.1.0"
    assert pip_args(None, "https://pypi.internal/simple") == ["--index-url", "https://pypi.internal/simple"]


def test_a_wheel_folder_installs_offline_and_must_hold_afd_e2e(tmp_path):
    with pytest.raises(Refused, match=rf"--wheels {tmp_path} holds no afd-e2e wheel \(fix: build the folder"):
        check_source(None, tmp_path, None)
    (tmp_path / "afd_e2e-0.1.0-py3-none-any.whl").write_bytes(b"")
    assert check_source(None, tmp_path, None) == "afd-e2e"
    assert pip_args(tmp_path) == ["--no-index", "--find-links", str(tmp_path)]
    with pytest.raises(Refused, match="--wheels and --index-url both given"):
        check_source(None, tmp_path, "https://pypi.internal/simple")


def test_a_folder_or_an_index_named_is_the_only_source_pip_sees(monkeypatch, tmp_path):
    """pip's configuration (files, PIP_* variables) may add indexes and find-links: not beside the one named."""
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://elsewhere/simple")
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    monkeypatch.setenv("PIP_CERT", "/etc/ssl/certs/ca.crt")
    for env in (pip_env(tmp_path, None), pip_env(None, "https://pypi.internal/simple")):
        assert "PIP_EXTRA_INDEX_URL" not in env and "PIP_FIND_LINKS" not in env
        assert (env["PIP_CONFIG_FILE"], env["PIP_CERT"]) == (os.devnull, "/etc/ssl/certs/ca.crt")
    assert pip_env(None, None) is None  # a wheel file, a checkout, a git URL: its requirements from pip's setup


def test_a_wheel_file_must_exist(tmp_path):
    wheel = tmp_path / "afd_e2e-0.1.0-py3-none-any.whl"
    with pytest.raises(Refused, match="does not exist"):
        check_source(str(wheel), None, None)
    wheel.write_bytes(b"")
    assert check_source(str(wheel), None, None) == str(wheel)


def test_the_script_refuses_in_one_line_before_making_anything(tmp_path):
    venv = tmp_path / "agent-venv"
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "install-agent"), "--venv", str(venv), "afd-e2e"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "install-agent: error: afd-e2e is a bare name, which a package index would resolve (no afd-e2e is published "
        "on one: whoever registers the name gets its code run here) (fix: pass --wheels DIR, a wheel file or a pinned "
        "git URL; or name the index you trust with --index-url URL)"
    ]
    assert not venv.exists()


def test_it_is_reachable_after_install_as_an_afd_e2e_subcommand(tmp_path: Path):
    args = build_parser().parse_args(["install-agent", "--venv", str(tmp_path), "--wheels", str(tmp_path)])
    assert args.func.__module__ == "afd_e2e.commands.install_agent"
    assert (args.venv, args.wheels, args.source, args.index_url) == (tmp_path, tmp_path, None, None)
