"""scripts/install-agent as a provisioning team runs it, offline from a folder of wheels: afd-e2e in a venv of its
own that sees the vLLM environment (here the CPU vLLM's venv), and a refusal naming the package an install would
change. Wheels are built here with `pip wheel --no-deps --no-build-isolation` (no registry needed).

Engine tier (moved from tests/unit/foundation): it installs into the real CPU vLLM's environment and builds wheels
with that environment's setuptools and wheel, which the unit tier's venv (the package and its test tools) lacks.
Launches no vLLM server."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from afd_e2e import __version__
from repo_paths import REPO

LAUNCHES = 0  # the most vLLM servers this module starts (tests/launch_counter.py): installs and probes; no server

pytestmark = [pytest.mark.engine, pytest.mark.serverless]  # no server: beside the engine tier (scripts/test)

INSTALL_AGENT = REPO / "scripts" / "install-agent"


def build_wheel(project: Path, out: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out), "."],
        cwd=project,
        check=True,
    )


def tiny_project(root: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A one-module distribution to build a wheel from."""
    project = root / f"{name}-{version}"
    (project / name.replace("-", "_")).mkdir(parents=True)
    (project / name.replace("-", "_") / "__init__.py").write_text(f'VERSION = "{version}"\n')
    dependencies = ", ".join(f'"{r}"' for r in requires)
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\ndependencies = [{dependencies}]\n'
    )
    return project


def install_agent(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(INSTALL_AGENT), *argv], capture_output=True, text=True, check=False, timeout=300
    )


def distribution_version(python: Path, name: str) -> str:
    code = f"from importlib.metadata import version; print(version({name!r}))"
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def afd_e2e_wheels(tmp_path_factory) -> Path:
    wheels = tmp_path_factory.mktemp("wheels")
    build_wheel(REPO, wheels)
    assert [w.name for w in wheels.iterdir()] == [f"afd_e2e-{__version__}-py3-none-any.whl"]
    return wheels


def test_installs_offline_into_its_own_venv_that_sees_the_vllm_environment(tmp_path, afd_e2e_wheels):
    if shutil.which("vllm") is None:
        pytest.fail("no vllm on PATH: run through scripts/test, which puts the CPU vLLM's venv first")
    venv = tmp_path / "agent-venv"
    done = install_agent("--venv", str(venv), "--wheels", str(afd_e2e_wheels), "--profile", "tiny-cpu")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 package(s) added (none), 0 changed" in done.stdout  # every requirement met by the vLLM environment
    assert "[install-agent] software check vllm: passed:" in done.stdout
    assert f"afd-e2e runs in {venv}/bin/python" in done.stdout
    assert done.stdout.rstrip().endswith(f"Configure the plugin step with:\n  venv: {venv}")
    version = subprocess.run([str(venv / "bin" / "afd-e2e"), "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.strip() == f"afd-e2e {__version__}"
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert (site / "afd_e2e" / "__init__.py").exists()  # its own copy, not the checkout's


def test_refuses_to_change_a_package_the_environment_has(tmp_path):
    """An app whose requirement would upgrade a package the environment holds: nothing is installed, the conflict is
    named with both versions."""
    wheels, held = tmp_path / "wheels", tmp_path / "held"
    build_wheel(tiny_project(tmp_path, "afd-probe-dep", "1.0"), held)
    build_wheel(tiny_project(tmp_path, "afd-probe-dep", "2.0"), wheels)
    build_wheel(tiny_project(tmp_path, "afd-probe-app", "1.0", ("afd-probe-dep==2.0",)), wheels)
    environment = tmp_path / "vllm-env"
    subprocess.run([sys.executable, "-m", "venv", str(environment)], check=True)
    python = environment / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--quiet", "--no-index", "--find-links"]
    subprocess.run([*pip, str(held), "afd-probe-dep"], check=True)

    done = install_agent("--into", str(python), "--wheels", str(wheels), "afd-probe-app")

    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "install-agent: error: installing afd-probe-app would change 1 package(s) this environment has: "
        "afd-probe-dep 1.0 -> 2.0 (fix: install wheels whose requirements admit the installed versions, or use "
        "--venv for a separate environment)"
    ]
    assert distribution_version(python, "afd-probe-dep") == "1.0"
    assert not list(environment.glob("lib/python3*/site-packages/afd_probe_app*"))


def test_refuses_a_wheels_folder_that_is_not_there(tmp_path):
    done = install_agent("--venv", str(tmp_path / "v"), "--wheels", str(tmp_path / "missing"))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"install-agent: error: --wheels {tmp_path / 'missing'} is not a folder "
        "(fix: pass the folder holding afd-e2e's wheels)"
    )
    assert not (tmp_path / "v").exists()
