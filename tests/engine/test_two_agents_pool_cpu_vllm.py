"""One build on the stub agent pool (tests/agent_pool.py) with the real afd-e2e and the real CPU vLLM: the generated
leader step of tiny-cpu-two-agents runs under the plugin's real hooks on agent-a, uploads its follower step at the
rendezvous, and agent-b picks that up as a separate process in its own folder, also under the real hooks
(``afd-e2e join --follow``). All phases pass, the leader's report is merged (the follower's process, hygiene, logs
and telemetry in it; the same-software checks with the follower's identity), and nothing is left.

One vLLM launch (the follower's server). It also holds the checks of a passing two-agent build that
``test_two_agents_cpu_vllm.py`` once made on a launch of its own: the same leader and follower, here under the hooks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from afd_e2e.pipeline.decide import RUN, Decision, ProfileDecision
from afd_e2e.pipeline.generate import GpuStepSettings, build_pipeline
from afd_e2e.pipeline.steps import render
from afd_e2e.profile import load_profile
from afd_e2e.runner.hygiene import NOTHING_HERE
from afd_e2e.system.markers import find_marked
from agent_pool import RECORD_CALL, AgentPool, PoolAgent
from repo_paths import GSM8K_DIR

LAUNCHES = 1  # the most vLLM servers this module starts (tests/launch_counter.py): the follower's server

pytestmark = pytest.mark.engine

PROFILE = "tiny-cpu-two-agents"  # its port block, 18600, is this module's
PORT_BASE = load_profile(PROFILE).engine.port_base
CASE, PROCESS = "cpu-tp1-remote", "server"
AGENTS = (PoolAgent("agent-a", {"queue": "afd-e2e-cpu"}), PoolAgent("agent-b", {"queue": "afd-e2e-cpu-follower"}))


def leader_steps(gate_env: dict[str, str]) -> list[dict]:
    decision = Decision(RUN, "scheduled build", ("scheduled builds run unattended",), gate_env=gate_env)
    pipeline = yaml.safe_load(
        render(build_pipeline([ProfileDecision(PROFILE, load_profile(PROFILE), decision)], GpuStepSettings()))
    )
    (group,) = pipeline["steps"]
    return group["steps"]


def meta_data(agent: Path, store: Path, leader_job: str, key: str, scratch: Path) -> str | None:
    """The build's ``afd-e2e/<leader job>/<key>``, read through the buildkite-agent stub (``agent``, linked under
    that name: the stub answers by its name) on the pool's store."""
    env = {**os.environ, "STUB_BUILDKITE_STORE": str(store), "STUB_CALLS": str(scratch / "meta-data-calls.log")}
    done = subprocess.run(
        [str(agent), "meta-data", "get", f"afd-e2e/{leader_job}/{key}"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout if done.returncode == 0 else None


def test_a_build_runs_its_leader_and_the_follower_it_uploads_under_the_real_hooks(tiny_model, tmp_path):
    tools = tmp_path / "tools"  # the stubbed agent and this Python's afd-e2e and vllm, for every job
    tools.mkdir()
    for name in ("buildkite-agent", "nvidia-smi"):
        (tools / name).symlink_to(RECORD_CALL)
    path = f"{tools}:{Path(sys.executable).parent}:/usr/bin:/bin"
    gates = {"AFD_E2E_BACKEND": "cpu", "AFD_E2E_TINY_MODEL": str(tiny_model)}
    pool = AgentPool(tmp_path / "pool", AGENTS)
    env = {"PATH": path, "AFD_E2E_GSM8K_DIR": str(GSM8K_DIR), "TMPDIR": "/tmp"}  # vLLM's sockets: a short path
    store = pool.start_build("build-1", leader_steps(gates), env=env)

    outcome = pool.run(no_progress_s=60, limit_s=540)

    assert outcome.deadlock is None, outcome.deadlock.describe()
    leader, follower = outcome.of_build("build-1")
    assert (leader.agent, follower.agent) == ("agent-a", "agent-b")
    assert (leader.exit_status, follower.exit_status) == (0, 0), leader.log()[-6000:] + follower.log()[-6000:]
    assert f"afd-e2e join --leader-job {leader.id} --follow cpu-tp1-remote/server" in follower.log()
    assert f"leader job {leader.id} is waiting: joining its rendezvous" in follower.log()
    out = leader.folder / "build" / "afd-e2e-out"
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["verdict"]["status"] == "passed", results["verdict"]
    case = results["cases"][CASE]
    assert case["status"] == "passed" and case["smoke"]["status"] == "passed" and case["gsm8k"]["status"] == "passed"
    (process,) = case["processes"]  # the leader hosts nothing of this case: the one process is the follower's
    assert (process["name"], process["agent"], process["exit_code"]) == (PROCESS, follower.agent, 0)
    assert (out / process["log"]).read_text(encoding="utf-8").count("Application startup")
    assert {c["agent"] for c in case["hygiene"]} == {"", "agent-b"}
    follower_checks = {c["check"]: c["status"] for c in case["hygiene"] if c["agent"] == follower.agent}
    assert set(follower_checks) == {"processes", "ports", "gpu_memory", "forced_kill", "leftover_files"}
    assert set(follower_checks.values()) <= {"passed", "skipped"}, case["hygiene"]
    on_leader = {c["check"]: (c["status"], c["detail"]) for c in case["hygiene"] if c["agent"] == ""}
    for check in ("forced_kill", "ports", "gpu_memory"):  # nothing of the case runs there: said, not "passed"
        assert on_leader[check] == ("skipped", NOTHING_HERE), case["hygiene"]
    assert (out / case["telemetry"]["path"]).exists()  # the follower sampled its server
    assert meta_data(tools / "buildkite-agent", store, leader.id, "leader", tmp_path) == "ended:passed"
    ready = json.loads(
        meta_data(tools / "buildkite-agent", store, leader.id, f"{CASE}/{PROCESS}/ready", tmp_path) or "{}"
    )
    assert (ready["agent"], ready["host"], ready["ports"]) == (follower.agent, "127.0.0.1", [PORT_BASE])
    assert ready["identity"]["hosts"] == PROCESS and ready["identity"]["checkpoint"].startswith("sha256:")
    same = {c["name"]: c for c in results["preflight"]["checks"] if c["name"].startswith("same software")}
    assert set(same) == {f"same software: {w}" for w in ("afd-e2e", "vLLM", "AFD plugin", "checkpoint")}, same
    assert all(c["status"] == "passed" and follower.agent in c["measured"] for c in same.values()), same
    annotation = (out / "annotation.md").read_text(encoding="utf-8")
    assert annotation.startswith("## ✅")
    assert f"on agent {follower.agent}".replace("-", "\\-") in annotation.split("### Hygiene")[1]  # its own row
    for job in (leader, follower):
        for record in job.folder.glob("build/afd-e2e-out/**/run-record.json"):
            assert find_marked(json.loads(record.read_text())["run_id"]) == [], record
