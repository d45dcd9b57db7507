"""One CI definition: this repository's pipeline runs .ci/run, which is the README's two commands (scripts/test, the
one test command, which also runs scripts/test-lowest, and beside it scripts/run-embedded-default, the first), then
the generator; no lint or test command is repeated outside scripts/test."""

from __future__ import annotations

import yaml
from bk_support import REPO

PIPELINE = yaml.safe_load((REPO / ".buildkite" / "pipeline.yml").read_text(encoding="utf-8"))


def commands(step: dict) -> list[str]:
    return step.get("commands") or [step["command"]]


def test_the_pipeline_runs_ci_run_then_the_generator():
    ci, generator = PIPELINE["steps"]
    assert commands(ci) == [".ci/run"]
    assert generator["depends_on"] == [ci["key"]]
    assert commands(generator)[-1].startswith("afd-e2e pipeline ")


def test_ci_run_is_the_readme_commands():
    lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    parts = [line.split(" ", 2) for line in lines if line.startswith(("timed ", "beside "))]  # timed PART COMMAND...
    assert parts == [
        # lm-eval's venv (scripts/test's set-up installs it too, and then finds it ready) beside vLLM's
        ["timed", "install-lm-eval", 'scripts/install-lm-eval >"$work/install-lm-eval.log" &'],
        ["timed", "install-cpu-vllm", "scripts/install-cpu-vllm"],
        ["beside", "run-embedded-default", "scripts/run-embedded-default --port-base 24400"],
        ["timed", "scripts/test", "scripts/test || status=$?"],
    ]
    test = (REPO / "scripts" / "test").read_text(encoding="utf-8")
    assert "scripts/test-lowest" in test and 'flock "$engine_lock"' in test  # the engine tier waits for the lock
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "scripts/run-embedded-default" in readme and "scripts/test" in readme


def test_lint_and_tests_are_listed_once_in_scripts_test():
    everywhere = [*(c for step in PIPELINE["steps"] for c in commands(step)), (REPO / ".ci/run").read_text("utf-8")]
    for tool in ("shellcheck", "ruff", "pytest", "run-bats"):
        assert not [text for text in everywhere if tool in text], tool
        assert tool in (REPO / "scripts" / "test").read_text(encoding="utf-8")
    assert (REPO / "scripts" / "test").read_text(encoding="utf-8").count("shellcheck -x") == 1
