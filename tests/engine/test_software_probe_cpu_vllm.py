"""Engine tier: the software probe asks the real CPU vLLM's `vllm` (its interpreter answers, not afd-e2e's): from a
fresh virtual environment without vLLM, the routing strategies it knows, the forced-routing control it cannot run,
and an agent's identity for the same-software check built from that probe.

Launches no vLLM server: each test runs the installed `vllm`'s interpreter for a probe (seconds). Moved here from
tests/unit (system/test_engine_probe.py, preflight/test_same_software.py): they need the real vLLM installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import yaml

from afd_e2e import __version__
from afd_e2e.multi_agent.identity import AgentIdentity, checkpoint_fingerprint, identity_of
from afd_e2e.preflight.software import read_installed
from afd_e2e.system.engine_probe import interpreter_of, probe_engine
from repo_paths import REPO
from unit.preflight.preflight_fixtures import QWEN35_CONFIG, write_checkpoint

# the most vLLM servers this module starts (tests/launch_counter.py): probes the installed vllm's interpreter
LAUNCHES = 0

pytestmark = [pytest.mark.engine, pytest.mark.serverless]  # no server: beside the engine tier (scripts/test)

REAL_VLLM = shutil.which("vllm")
needs_vllm = pytest.mark.skipif(REAL_VLLM is None, reason="no vllm on PATH (scripts/install-cpu-vllm installs one)")


@needs_vllm
def test_afd_e2e_without_vllm_reports_the_vllm_it_will_launch(tmp_path):
    bare = tmp_path / "novllm"
    venv.create(bare, with_pip=False)
    python = bare / "bin" / "python"
    deps = tmp_path / "deps"  # afd-e2e's own dependency for this path (PyYAML), without the rest of this venv
    deps.mkdir()
    (deps / "yaml").symlink_to(Path(yaml.__file__).parent)
    ask = (
        "import json, sys; from afd_e2e.preflight.software import read_installed; "
        f"s = read_installed({REAL_VLLM!r}); "
        "print(json.dumps({**s.to_dict(), 'has_vllm_here': 'vllm' in sys.modules}))"
    )
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'python'}{os.pathsep}{deps}"}
    done = subprocess.run([str(python), "-c", ask], capture_output=True, text=True, env=env, timeout=120, check=True)
    found = json.loads(done.stdout)
    assert found["afd_e2e_python"] == str(python)
    assert found["vllm_executable"] == REAL_VLLM
    assert found["vllm_python"] == interpreter_of(REAL_VLLM) != str(python)
    assert found["vllm"] and found["vllm"][0].isdigit() and found["torch"]
    assert found["has_vllm_here"] is False
    here = subprocess.run(
        [str(python), "-c", "import importlib.util as u; print(u.find_spec('vllm'))"], capture_output=True, text=True
    )
    assert here.stdout.strip() == "None"  # the answer really came from the other environment


@needs_vllm
def test_the_routing_strategies_of_the_real_vllm_are_listed():
    engine = probe_engine(REAL_VLLM, routing_strategies=True)
    assert engine.routing_strategies is not None and "uniform_random" in engine.routing_strategies
    assert "afd_balanced" not in engine.routing_strategies  # the released vLLM has no forced-balance strategy


@needs_vllm
def test_run_skips_the_forced_routing_control_the_real_vllm_cannot_run_before_any_load():
    from afd_e2e.plan import build_plan
    from afd_e2e.profile import load_profile
    from afd_e2e.runner.admission import without_unrunnable_control

    profile = load_profile("tiny-gpu-1a1f")
    rebuild = {"model_path": "/models/tiny-dsv2", "devices": (0, 1), "case_ids": (), "port_base": None}
    plan = build_plan(profile, **rebuild, forced_routing_control=True)
    assert any(case.control for case in plan.cases)

    kept, reason = without_unrunnable_control(profile, plan)

    assert not any(case.control for case in kept.cases) and not any(c.control for c in kept.comparisons)
    assert reason is not None
    assert reason.startswith("forced-routing control skipped: VLLM_MOE_ROUTING_SIMULATION_STRATEGY=afd_balanced")
    assert "it knows uniform_random, normal_routing" in reason and "(fix: " in reason
    assert without_unrunnable_control(profile, kept) == (kept, None)  # nothing to skip without a control


@needs_vllm
def test_an_identity_comes_from_the_software_probe_and_the_checkpoint(tmp_path):
    installed = read_installed("vllm")
    folder = write_checkpoint(tmp_path / "ckpt", QWEN35_CONFIG)
    me = identity_of("cpu-agent-1", "leader", installed, str(folder))
    assert me.afd_e2e == __version__
    assert me.vllm == installed.vllm and me.vllm is not None
    assert me.afd_plugin == installed.afd_plugin_version
    assert me.checkpoint == checkpoint_fingerprint(folder) and me.checkpoint.startswith("sha256:")
    assert AgentIdentity.from_meta_data(me.to_meta_data(), "k") == me


@needs_vllm
def test_preflight_refuses_model_runner_v2_where_the_cpu_vllm_has_no_triton(tmp_path):
    """vLLM's CPU install has no Triton, and its Model Runner V2 refuses to start without it: a profile asking V2
    is refused in preflight, naming the installed version, before any server starts (issue 42: "where the CPU
    backend has no V2 runner, preflight refuses it in one line naming the version")."""
    document = yaml.safe_load((REPO / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text(encoding="utf-8"))
    document["engine"]["model_runner"] = "v2"
    profile = tmp_path / "tiny-cpu-v2.yaml"
    profile.write_text(yaml.safe_dump(document), encoding="utf-8")
    installed = read_installed(REAL_VLLM)
    assert installed.triton is None, f"this vLLM has Triton {installed.triton}: the refusal cannot be shown here"
    env = {**os.environ, "PYTHONPATH": str(REPO / "python"), "AFD_E2E_TINY_MODEL": str(tmp_path)}
    command = [
        sys.executable,
        "-m",
        "afd_e2e",
        "preflight",
        "--profile",
        str(profile),
        "--model",
        str(tmp_path),
        "--json",
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    refused = checks["model runner"]
    assert done.returncode == 1 and refused["status"] == "failed"
    assert f"vLLM {installed.vllm} in {installed.vllm_python} has no Triton" in refused["measured"]
