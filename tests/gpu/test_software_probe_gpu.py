"""The software check on the GPU machine asks the vLLM it will launch, from an afd-e2e that has no vLLM of its own.

Two virtual environments on the image's Python (its torch, nvidia-ml-py, PyYAML): one holds the kit's vLLM 0.26.0
and the AFD plugin (a .pth naming the folders the kit's env.sh puts on PYTHONPATH) and its own `vllm` console
script; the other runs afd-e2e and cannot import vLLM. Preflight from the second must report the first's vLLM,
torch and AFD plugin and name both interpreters; with --forced-routing-control it must name the routing strategies
vLLM knows, and `afd-e2e run` must drop the control with that reason before any model loads.

Run on the GPU machine after `. /tmp/vl/env.sh`: python3 -m pytest tests/gpu/test_software_probe_gpu.py -v -s -m gpu
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
import venv
from pathlib import Path

import pytest

from gpu_agent import why_not_gpus

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
MODEL = os.environ.get("AFD_GPU_E2E_MODEL", "/tmp/vl/tiny-dsv2")
KIT_PATHS = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p, "vllm").is_dir()]
EXTRA_PATHS = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in KIT_PATHS]

if shutil.which("nvidia-smi") is None:
    pytest.skip("no nvidia-smi: not a GPU machine", allow_module_level=True)
if not KIT_PATHS:
    pytest.skip("no vLLM folder on PYTHONPATH: source /tmp/vl/env.sh first", allow_module_level=True)


def site_packages(env_dir: Path) -> Path:
    return Path(sysconfig.get_path("purelib", vars={"base": str(env_dir), "platbase": str(env_dir)}))


@pytest.fixture(scope="module")
def envs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("envs")
    engine, bare = root / "vllm-env", root / "afd-e2e-env"
    # Both see this interpreter's packages (the image's torch, PyYAML, psutil, nvidia-ml-py: venv.create starts from
    # the base Python, which may lack them); only the engine environment sees the kit's vLLM and the AFD plugin.
    image = sysconfig.get_path("purelib")
    for folder in (engine, bare):
        venv.create(folder, system_site_packages=True, with_pip=False)
        (site_packages(folder) / "image.pth").write_text(image + "\n")
    (site_packages(engine) / "kit.pth").write_text("\n".join([*EXTRA_PATHS, *KIT_PATHS]) + "\n")
    python = engine / "bin" / "python"
    console = engine / "bin" / "vllm"
    console.write_text(
        f"#!{python}\nimport sys\nfrom vllm.entrypoints.cli.main import main\nsys.exit(main())\n", encoding="utf-8"
    )
    console.chmod(0o755)
    return {"engine": engine, "bare": bare}


def afd_e2e(envs: dict[str, Path], *args: str, code: str | None = None) -> subprocess.CompletedProcess:
    """afd-e2e in the environment without vLLM; `vllm` on PATH is the engine environment's console script."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"PYTHONPATH": str(REPO / "python"), "PATH": f"{envs['engine'] / 'bin'}{os.pathsep}{env['PATH']}"}
    argv = [str(envs["bare"] / "bin" / "python"), *(["-c", code] if code else ["-m", "afd_e2e", *args])]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False)


def test_afd_e2e_here_has_no_vllm(envs):
    done = afd_e2e(envs, code="import importlib.util as u; print(u.find_spec('vllm'))")
    assert done.stdout.strip() == "None", done.stderr


def test_preflight_reports_the_kits_vllm_and_the_afd_plugin_from_the_other_environment(envs):
    done = afd_e2e(envs, "preflight", "--profile", "tiny-gpu-1a1f", "--devices", "0,1", "--model", MODEL, "--json")
    assert done.stdout.strip(), done.stderr
    report = json.loads(done.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    software = report["software"]
    print(json.dumps(software, indent=1))
    print(checks["vllm"]["measured"], "|", checks["afd plugin"]["measured"], sep="\n")
    assert software["afd_e2e_python"] == str(envs["bare"] / "bin" / "python")
    assert software["vllm_python"] == str(envs["engine"] / "bin" / "python")
    assert software["vllm"].startswith("0.26.0") and software["torch"]
    assert checks["vllm"]["status"] == "passed"
    assert checks["afd plugin"]["status"] == "passed" and software["afd_plugin"]


def test_the_forced_routing_control_is_refused_before_loading_naming_the_strategies(envs):
    if reason := why_not_gpus(2):  # tiny-gpu-1a1f's devices 0,1: vLLM's platform probe asks NVML for both
        pytest.skip(reason)
    done = afd_e2e(
        envs, "preflight", "--profile", "tiny-gpu-1a1f", "--devices", "0,1", "--model", MODEL,
        "--forced-routing-control", "--json",
    )  # fmt: skip
    assert done.stdout.strip(), done.stderr
    report = json.loads(done.stdout)
    check = next(c for c in report["checks"] if c["name"] == "routing strategy")
    strategies = report["software"]["routing_strategies"]
    print(check)
    assert strategies, report["software"]
    if "afd_balanced" in strategies:
        assert check["status"] == "passed"
    else:
        assert check["status"] == "failed" and f"it knows {', '.join(strategies)}" in check["measured"]

    skip = (
        "from afd_e2e.runner.admission import without_unrunnable_control; from afd_e2e.plan import build_plan;"
        "from afd_e2e.profile import load_profile; p = load_profile('tiny-gpu-1a1f');"
        f"r = dict(model_path={MODEL!r}, devices=(0, 1), case_ids=(), port_base=None);"
        "plan, why = without_unrunnable_control(p, build_plan(p, **r, forced_routing_control=True));"
        "print([c.id for c in plan.cases]); print(why)"
    )
    done = afd_e2e(envs, code=skip)
    print(done.stdout, done.stderr)
    if "afd_balanced" not in strategies:
        assert "forced-routing control skipped: VLLM_MOE_ROUTING_SIMULATION_STRATEGY=afd_balanced" in done.stdout
        assert "afd-balanced" not in done.stdout.splitlines()[0]  # no control case left to load a model for
