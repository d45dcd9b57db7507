"""A child's environment: the agent's minus stripped variables, plus the plan's, run-folder redirections, markers."""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path

import pytest

from afd_e2e.errors import UsageError
from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.system.child_env import child_environment, client_environment
from afd_e2e.system.executables import resolve_executable
from afd_e2e.system.markers import CASE_ENV, PROCESS_ENV, RUN_ID_ENV, marker_env


def qwen_process():
    profile = load_profile("qwen3.5-122b-a10b")
    plan = build_plan(profile, model_path="/models/qwen", devices=(0, 2, 4, 6, 1, 3, 5, 7))
    return next(p for case in plan.cases for p in case.processes if p.role == "attention")


def test_child_env_strips_sets_redirects_and_marks(tmp_path):
    process = qwen_process()
    stripped = process.env_unset[0]
    base = {"PATH": "/usr/bin", stripped: "afd_balanced", "TMPDIR": "/tmp", "VLLM_CACHE_ROOT": "/root/.cache/vllm"}

    env = child_environment(
        base, process, scratch=tmp_path / "s", cache=tmp_path / "c", markers=marker_env("r1", "case-a", "attention")
    )

    assert stripped not in env
    assert env["PATH"] == "/usr/bin"
    assert env["VLLM_PLUGINS"] == "afd" and env["CUDA_VISIBLE_DEVICES"] == process.env_set["CUDA_VISIBLE_DEVICES"]
    assert env["TMPDIR"] == env["VLLM_RPC_BASE_PATH"] == str(tmp_path / "s")
    assert env["VLLM_CACHE_ROOT"] == str(tmp_path / "c" / "vllm")
    assert env["XDG_CACHE_HOME"] == str(tmp_path / "c" / "xdg")
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "c" / "torchinductor")
    assert (env[RUN_ID_ENV], env[CASE_ENV], env[PROCESS_ENV]) == ("r1", "case-a", "attention")
    assert base[stripped] == "afd_balanced"  # the agent's own environment is left alone


def _executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_executable_next_to_python_wins_over_path(tmp_path):
    venv_bin, other = tmp_path / "venv" / "bin", tmp_path / "other"
    venv_bin.mkdir(parents=True)
    other.mkdir()
    beside = _executable(venv_bin / "vllm")
    _executable(other / "vllm")

    assert resolve_executable("vllm", python=str(venv_bin / "python"), search_path=str(other)) == str(beside)


def test_executable_falls_back_to_path(tmp_path):
    on_path = _executable(tmp_path / "vllm")

    assert resolve_executable("vllm", python="/nonexistent/bin/python", search_path=str(tmp_path)) == str(on_path)


def test_missing_executable_is_a_usage_error_naming_it(tmp_path):
    with pytest.raises(UsageError, match=r"no 'vllm' executable next to /nonexistent/bin/python or on PATH"):
        resolve_executable("vllm", python="/nonexistent/bin/python", search_path=str(tmp_path))
    with pytest.raises(UsageError, match="does not exist"):
        resolve_executable(str(tmp_path / "nope" / "vllm"))
    assert resolve_executable(os.path.realpath("/bin/sh")) == os.path.realpath("/bin/sh")


def test_no_child_inherits_the_agents_credentials(tmp_path):
    process = qwen_process()
    base = {
        "PATH": "/usr/bin",
        "BUILDKITE_AGENT_ACCESS_TOKEN": "agent-secret",
        "BUILDKITE_API_TOKEN": "api-secret",
        "HF_TOKEN": "hf",
        "AWS_SECRET_ACCESS_KEY": "aws",
        "OPENAI_API_KEY": "k",
        "TOKENIZERS_PARALLELISM": "false",
        "BUILDKITE_BUILD_ID": "b1",
    }
    markers = marker_env("r1", "case-a", "attention")

    server = child_environment(base, process, scratch=tmp_path / "s", cache=tmp_path / "c", markers=markers)
    client = client_environment(base, markers=marker_env("r1", "case-a", "bench"))

    for env in (server, client):
        assert not {"BUILDKITE_AGENT_ACCESS_TOKEN", "BUILDKITE_API_TOKEN", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY"} & set(
            env
        )
        assert "OPENAI_API_KEY" not in env
        assert env["TOKENIZERS_PARALLELISM"] == "false" and env["BUILDKITE_BUILD_ID"] == "b1"
    assert (client[RUN_ID_ENV], client[CASE_ENV], client[PROCESS_ENV]) == ("r1", "case-a", "bench")


def test_a_credential_the_plan_sets_itself_is_kept(tmp_path):
    process = dataclasses.replace(qwen_process(), env_set={"VLLM_API_KEY": "the profile's"})
    env = child_environment(
        {"VLLM_API_KEY": "agent's"}, process, scratch=tmp_path, cache=tmp_path, markers=marker_env("r", "c", "p")
    )
    assert env["VLLM_API_KEY"] == "the profile's"
