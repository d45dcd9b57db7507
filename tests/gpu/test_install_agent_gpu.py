"""scripts/install-agent on the GPU machine, as a provisioning team runs it: no registry, the kit's vLLM 0.26.0 on
PYTHONPATH (CPython 3.12), a folder of wheels carried in. It must install offline into a venv of its own that
sees the image and the kit, change none of their packages, pass the software check (the kit's `vllm` wrapper's
Python, the AFD plugin's entry point) and print the plugin's `venv` option and the agent's tags.

Run on the GPU machine after `. /tmp/vl/env.sh`, with the folder built on the CPU machine
(`scripts/build-wheelhouse .gpu-vllm/agent-wheels`: afd-e2e's wheel and py-spy's, the one requirement the image
lacks, are both for any CPython 3, so a folder built with 3.11 serves the image's 3.12):

    python3 -m pytest tests/gpu/test_install_agent_gpu.py -v -s -k one_gpu

AFD_E2E_AGENT_WHEELS overrides the wheels folder; AFD_GPU_RESULTS_DIR, when set, receives the script's output
(install-agent.txt) to commit as a fixture.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
WHEELS = Path(os.environ.get("AFD_E2E_AGENT_WHEELS", REPO / ".gpu-vllm" / "agent-wheels"))
KIT_PATHS = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p, "vllm").is_dir()]

if shutil.which("nvidia-smi") is None:
    pytest.skip("no nvidia-smi: not a GPU machine", allow_module_level=True)
if not KIT_PATHS or shutil.which("vllm") is None:
    pytest.skip("no vLLM on PYTHONPATH/PATH: source /tmp/vl/env.sh first", allow_module_level=True)
if not list(WHEELS.glob("afd_e2e-*.whl")):
    pytest.skip(f"no afd-e2e wheel in {WHEELS}: build it on the CPU machine and carry it", allow_module_level=True)


def freeze(python: str) -> dict[str, str]:
    code = "from importlib.metadata import distributions as d\nfor x in d(): print(x.metadata['Name'], x.version)"
    lines = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    return {name.lower(): version for name, version in (line.rsplit(" ", 1) for line in lines)}


def test_install_agent_one_gpu_offline_beside_the_kits_vllm(tmp_path):
    venv = tmp_path / "afd-e2e-venv"
    before = freeze(sys.executable)
    install = [sys.executable, str(REPO / "scripts" / "install-agent"), "--venv", str(venv), "--wheels", str(WHEELS)]
    done = subprocess.run(
        [*install, "--profile", "tiny-gpu-1a1f"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = done.stdout + done.stderr
    print(output)
    if os.environ.get("AFD_GPU_RESULTS_DIR"):
        results = Path(os.environ["AFD_GPU_RESULTS_DIR"])
        results.mkdir(parents=True, exist_ok=True)
        (results / "install-agent.txt").write_text(output)
    assert done.returncode == 0, output
    assert "0 changed" in done.stdout
    assert "[install-agent] software check vllm: passed: 0.26.0" in done.stdout
    assert "[install-agent] software check afd plugin: passed" in done.stdout
    assert f"  venv: {venv}" in done.stdout
    assert "agent tags: gpu=nvidia-h200," in done.stdout
    assert freeze(sys.executable) == before  # the image and the kit are as they were
