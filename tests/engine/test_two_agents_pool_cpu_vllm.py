"""One build on the stub agent pool (tests/agent_pool.py) with the real afd-e2e and the real CPU vLLM: the generated
leader step of tiny-cpu-two-agents runs under the plugin's real hooks on agent-a, uploads its follower step at the
rendezvous, and agent-b picks that up as a separate process in its own folder, also under the real hooks
(``afd-e2e join --follow``). All phases pass, the leader's report is merged, and nothing is left.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from afd_e2e.pipeline.decide import RUN, Decision, ProfileDecision
from afd_e2e.pipeline.generate import GpuStepSettings, build_pipeline
from afd_e2e.pipeline.steps import render
from afd_e2e.profile import load_profile
from afd_e2e.system.markers import find_marked
from agent_pool import RECORD_CALL, AgentPool, PoolAgent
from repo_paths import GSM8K_DIR

pytestmark = pytest.mark.engine

PROFILE = "tiny-cpu-two-agents"  # its port block, 18600, is this module's
AGENTS = (PoolAgent("agent-a", {"queue": "afd-e2e-cpu"}), PoolAgent("agent-b", {"queue": "afd-e2e-cpu-follower"}))


def leader_steps(gate_env: dict[str, str]) -> list[dict]:
    decision = Decision(RUN, "scheduled build", ("scheduled builds run unattended",), gate_env=gate_env)
    pipeline = yaml.safe_load(
        render(build_pipeline([ProfileDecision(PROFILE, load_profile(PROFILE), decision)], GpuStepSettings()))
    )
    (group,) = pipeline["steps"]
    return group["steps"]


def test_a_build_runs_its_leader_and_the_follower_it_uploads_under_the_real_hooks(tiny_model, tmp_path):
    tools = tmp_path / "tools"  # the stubbed agent and this Python's afd-e2e and vllm, for every job
    tools.mkdir()
    for name in ("buildkite-agent", "nvidia-smi"):
        (tools / name).symlink_to(RECORD_CALL)
    path = f"{tools}:{Path(sys.executable).parent}:/usr/bin:/bin"
    gates = {"AFD_E2E_BACKEND": "cpu", "AFD_E2E_TINY_MODEL": str(tiny_model)}
    pool = AgentPool(tmp_path / "pool", AGENTS)
    env = {"PATH": path, "AFD_E2E_GSM8K_DIR": str(GSM8K_DIR), "TMPDIR": "/tmp"}  # vLLM's sockets: a short path
    pool.start_build("build-1", leader_steps(gates), env=env)

    outcome = pool.run(no_progress_s=60, limit_s=540)

    assert outcome.deadlock is None, outcome.deadlock.describe()
    leader, follower = outcome.of_build("build-1")
    assert (leader.agent, follower.agent) == ("agent-a", "agent-b")
    assert (leader.exit_status, follower.exit_status) == (0, 0), leader.log()[-6000:] + follower.log()[-6000:]
    assert f"afd-e2e join --leader-job {leader.id} --follow cpu-tp1-remote/server" in follower.log()
    assert f"leader job {leader.id} is waiting: joining its rendezvous" in follower.log()
    results = json.loads((leader.folder / "build" / "afd-e2e-out" / "results.json").read_text(encoding="utf-8"))
    assert results["verdict"]["status"] == "passed", results["verdict"]
    (process,) = results["cases"]["cpu-tp1-remote"]["processes"]
    assert (process["name"], process["agent"]) == ("server", "agent-b")
    assert {c["agent"] for c in results["cases"]["cpu-tp1-remote"]["hygiene"]} == {"", "agent-b"}
    for job in (leader, follower):
        for record in job.folder.glob("build/afd-e2e-out/**/run-record.json"):
            assert find_marked(json.loads(record.read_text())["run_id"]) == [], record
