"""BuildEnv: what started the build, pull requests and forks, from Buildkite's variables."""

from __future__ import annotations

import pytest

from afd_e2e.buildkite.env import BuildEnv, repository_id

REPO_URL = "git@github.com:vllm-project/vllm.git"


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:vllm-project/vllm.git",
        "https://github.com/vllm-project/vllm",
        "https://github.com/vllm-project/vllm.git",
        "ssh://git@github.com/vllm-project/vllm.git",
        "ssh://git@github.com:22/vllm-project/vllm.git",
        "git://github.com/vllm-project/vllm.git",
        "HTTPS://GitHub.com/vLLM-project/vllm/",
    ],
)
def test_repository_spellings_agree(url):
    assert repository_id(url) == "github.com/vllm-project/vllm"


@pytest.mark.parametrize(
    ("variables", "is_fork", "described"),
    [
        ({"BUILDKITE_PULL_REQUEST": "false", "BUILDKITE_SOURCE": "webhook"}, False, "webhook build of branch main"),
        ({"BUILDKITE_SOURCE": "schedule"}, False, "scheduled build of branch main"),
        ({"BUILDKITE_SOURCE": "ui"}, False, "manual build (ui) of branch main"),
        ({"BUILDKITE_SOURCE": "api"}, False, "manual build (api) of branch main"),
        ({"BUILDKITE_SOURCE": "trigger_job"}, False, "triggered build of branch main"),
        ({}, False, "build outside Buildkite of branch main"),
        (
            {"BUILDKITE_PULL_REQUEST": "12", "BUILDKITE_PULL_REQUEST_REPO": "https://github.com/vllm-project/vllm"},
            False,
            "pull request #12 of branch main",
        ),
        (
            {"BUILDKITE_PULL_REQUEST": "13", "BUILDKITE_PULL_REQUEST_REPO": "https://github.com/someone/vllm.git"},
            True,
            "pull request #13 of branch main from a fork (github.com/someone/vllm)",
        ),
        (
            {"BUILDKITE_PULL_REQUEST": "14", "BUILDKITE_PULL_REQUEST_REPO": ""},
            True,
            "pull request #14 of branch main from a fork (unknown repository)",
        ),
    ],
)
def test_sources_pull_requests_and_forks(variables, is_fork, described):
    env = BuildEnv.from_environ({"BUILDKITE_REPO": REPO_URL, "BUILDKITE_BRANCH": "main", **variables})
    assert env.is_fork is is_fork
    assert env.describe() == described
    assert env.is_scheduled is (variables.get("BUILDKITE_SOURCE") == "schedule")


def test_variables_are_kept_for_the_gates():
    env = BuildEnv.from_environ({"AFD_E2E_BACKEND": "gpu"})
    assert env.variables["AFD_E2E_BACKEND"] == "gpu"
    assert env.pull_request is None
