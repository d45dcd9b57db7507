"""Test doubles for the Buildkite tests: agents as the REST API lists them, and a fake agent that runs steps.

The fake agent runs a generated step the way a Buildkite agent does: a command step's command in bash; a plugin's
hooks sourced in order (environment, pre-command, command, pre-exit), each one's exports carried to the next,
pre-exit always. ``buildkite-agent``, ``nvidia-smi`` and ``afd-e2e`` are tests/stubs/record-call on PATH.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from agent_pool import plugin_env

REPO = Path(__file__).resolve().parents[3]
RECORD_CALL = REPO / "tests" / "stubs" / "record-call"

# The opt-in of the qwen3.5-122b-a10b profile (the checkpoint path exists on the GPU agent only).
QWEN_OPT_IN = {
    "AFD_E2E_BACKEND": "gpu",
    "AFD_E2E_LARGE_MODEL": "1",
    "AFD_GPU_E2E_MODEL": "/models/Qwen3.5-122B-A10B",
    "AFD_E2E_DEVICES": "0,2,4,6,1,3,5,7",
}
# What Buildkite sets in the bootstrap job of organization acme, plus an agents API token.
BUILD = {
    "BUILDKITE_ORGANIZATION_SLUG": "acme",
    "BUILDKITE_AGENTS_API_TOKEN": "token",
    "BUILDKITE_REPO": "git@github.com:vllm-project/vllm.git",
    "BUILDKITE_BRANCH": "main",
}
AGENTS_LIST = "/organizations/acme/agents?per_page=100"


def agent(name: str, *tags: str, state: str = "connected") -> dict[str, Any]:
    """An agent as the REST API returns it (the fields the generator reads, plus a few it ignores)."""
    return {
        "id": f"id-{name}",
        "name": name,
        "hostname": f"{name}.example",
        "connection_state": state,
        "meta_data": list(tags),
        "version": "3.100.0",
    }


class FakeAgent:
    def __init__(self, workdir: Path, name: str = "gpu-agent-1") -> None:
        self.workdir = workdir
        self.bin = workdir / "bin"
        self.bin.mkdir(parents=True)
        for command in ("buildkite-agent", "nvidia-smi", "afd-e2e"):
            (self.bin / command).symlink_to(RECORD_CALL)
        self.calls_log = workdir / "calls.log"
        self.calls_log.touch()
        self.build_dir = workdir / "build"
        self.build_dir.mkdir()
        self.env = {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "HOME": str(workdir),
            "TMPDIR": str(workdir),
            "STUB_CALLS": str(self.calls_log),
            "BUILDKITE_AGENT_NAME": name,
            "BUILDKITE_JOB_ID": "job-1",
        }

    def calls(self) -> list[str]:
        return self.calls_log.read_text(encoding="utf-8").splitlines()

    def unblock(self, block: dict[str, Any], chosen: list[str]) -> None:
        """A person unblocks ``block``, choosing ``chosen`` in its select field (stored as build meta-data)."""
        (field,) = block["fields"]
        assert set(chosen) <= {option["value"] for option in field["options"]}
        self.env["STUB_BUILDKITE_AGENT_META_DATA_OUTPUT"] = "\n".join(chosen)

    def run_command(self, step: dict[str, Any]) -> int:
        env = {**self.env, **step.get("env", {})}
        return subprocess.run(["bash", "-c", step["command"]], cwd=self.build_dir, env=env, check=False).returncode

    def run_plugin(self, step: dict[str, Any], plugin_dir: Path) -> dict[str, int]:
        """Run the step's only plugin from ``plugin_dir``; returns each hook's exit status (a skipped hook is absent)."""
        ((reference, config),) = (item for plugin in step["plugins"] for item in plugin.items())
        assert reference.rsplit("#", 1)[0].endswith("afd-e2e"), reference
        env = {**self.env, **step.get("env", {}), **plugin_env(config)}
        statuses: dict[str, int] = {}
        for hook in ("environment", "pre-command", "command"):
            statuses[hook], env = self._source(plugin_dir / "hooks" / hook, env)
            if statuses[hook] != 0:
                break
        env["BUILDKITE_COMMAND_EXIT_STATUS"] = str(statuses.get("command", 1))
        statuses["pre-exit"], _ = self._source(plugin_dir / "hooks" / "pre-exit", env)
        return statuses

    def _source(self, hook: Path, env: dict[str, str]) -> tuple[int, dict[str, str]]:
        """Source ``hook`` in bash as the agent's hook wrapper does, capturing the environment it leaves."""
        dump = self.workdir / "env.dump"
        wrapper = 'trap \'env -0 > "$AFD_E2E_TEST_ENV_DUMP"\' EXIT; source "$1"'
        run_env = {**env, "AFD_E2E_TEST_ENV_DUMP": str(dump)}
        status = subprocess.run(
            ["bash", "-c", wrapper, "_", str(hook)], cwd=self.build_dir, env=run_env, check=False
        ).returncode
        after = dict(item.split("=", 1) for item in dump.read_text(encoding="utf-8").split("\0") if "=" in item)
        after.pop("AFD_E2E_TEST_ENV_DUMP", None)
        return status, after
