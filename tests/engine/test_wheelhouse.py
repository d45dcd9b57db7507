"""Engine tier (slow, no vLLM launched: 0 servers): the folder of wheels scripts/build-wheelhouse makes is complete
and installs afd-e2e offline, and installing afd-e2e from it beside the GPU image's packages changes none of them.

The folder is built at setup, not here: scripts/test runs `scripts/build-wheelhouse .wheelhouse` beside its other
installs (where the package index is reachable); AFD_E2E_WHEELHOUSE names another. Nothing here downloads: every pip
call is `--no-index --find-links` that folder.

- A clean venv (no system site-packages, nothing inherited) gets afd-e2e from the folder alone: afd-e2e, py-spy and
  `afd-e2e install-agent` work there.
- The GPU image's freeze (tests/fixtures/agent_env/image-freeze.txt, 197 packages, plus the kit's vLLM 0.26.0 and its
  bundled wheels) is laid out as installed distributions (metadata only, no code) in a venv, and pip's own resolver
  dry-runs the documented install there (`install-agent --wheels`'s dry run, and by hand with `-c
  requirements/gpu-image.txt`): it installs afd-e2e and py-spy, the one requirement the image lacks, and changes
  nothing. Limits: the resolver runs on this machine's CPython 3.11, not the image's 3.12 (markers and wheel tags
  are 3.11's), and the image's packages carry no requirements of their own (pip would not revisit them: it keeps a
  version that satisfies a range). The same dry run against the image with PyYAML older than afd-e2e's lower bound
  shows the check failing for that cause.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from afd_e2e import __version__
from afd_e2e.commands.install_agent import PIP, conflicts, describe_python, dry_run, pip_env
from repo_paths import FIXTURES, REPO

LAUNCHES = 0  # the most vLLM servers this module starts (tests/launch_counter.py): installs only

pytestmark = [pytest.mark.engine, pytest.mark.serverless]  # no server: beside the engine tier (scripts/test)

WHEELHOUSE = Path(os.environ.get("AFD_E2E_WHEELHOUSE") or REPO / ".wheelhouse")
AGENT_ENV = FIXTURES / "agent_env"


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    if not list(WHEELHOUSE.glob(f"afd_e2e-{__version__}-*.whl")):
        pytest.fail(f"no afd-e2e {__version__} wheel in {WHEELHOUSE}: run scripts/build-wheelhouse {WHEELHOUSE}")
    return WHEELHOUSE


def offline(wheels: Path) -> list[str]:
    return ["--no-index", "--find-links", str(wheels)]


def test_a_clean_venv_installs_afd_e2e_from_the_folder_alone(tmp_path, wheelhouse):
    venv = tmp_path / "clean"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--isolated", *offline(wheelhouse)]
    subprocess.run([*pip, "afd-e2e"], check=True, timeout=600)
    run = {"capture_output": True, "text": True, "check": True}
    assert (
        subprocess.run([str(venv / "bin" / "afd-e2e"), "--version"], **run).stdout.strip() == f"afd-e2e {__version__}"
    )
    assert subprocess.run([str(venv / "bin" / "py-spy"), "--version"], **run).stdout.startswith("py-spy 0.4.")
    help_text = subprocess.run([str(venv / "bin" / "afd-e2e"), "install-agent", "--help"], **run).stdout
    assert "--wheels WHEELS" in help_text and "--index-url INDEX_URL" in help_text


def exact_versions(path: Path) -> dict[str, str]:
    """canonical name -> version of a NAME==VERSION file."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return {canonical(name): version for name, version in (line.split("==") for line in lines if line)}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def gpu_image_venv(root: Path, changes: dict[str, str] | None = None) -> str:
    """A venv whose installed distributions are the GPU image's and the kit's (name and version only)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next((root / "lib").glob("python3*/site-packages"))
    packages = exact_versions(AGENT_ENV / "image-freeze.txt") | exact_versions(AGENT_ENV / "vllm-bundle-wheels.txt")
    packages |= {"vllm": "0.26.0", **{canonical(n): v for n, v in (changes or {}).items()}}
    for name, version in packages.items():
        info = site / f"{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "INSTALLER").write_text("gpu-image-freeze\n")
    python = str(root / "bin" / "python")
    PIP[python] = [sys.executable, "-m", "pip", "--python", python]  # as install-agent runs a venv made without pip
    return python


@pytest.fixture(autouse=True)
def _nothing_inherited(monkeypatch):
    """The image's packages are the venv's alone: no PYTHONPATH (a checkout's afd_e2e.egg-info would read as an
    installed afd-e2e), no find-links or constraints from this machine's pip setup (install-agent drops those)."""
    for name in ("PYTHONPATH", "PIP_FIND_LINKS", "PIP_CONSTRAINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)


def resolution(python: str, extra: list[str]) -> tuple[list[str], list[str]]:
    """What pip's resolver would install (name==version) and what of the environment that would change."""
    report = dry_run(python, extra, "afd-e2e", pip_env(WHEELHOUSE, None))  # as install-agent --wheels runs pip
    installs = sorted(f"{i['metadata']['name']}=={i['metadata']['version']}" for i in report.get("install", []))
    return installs, conflicts(report, describe_python(python)["dists"])


def test_installing_from_the_folder_on_the_gpu_image_adds_afd_e2e_and_py_spy_and_changes_nothing(tmp_path, wheelhouse):
    python = gpu_image_venv(tmp_path / "gpu-image")
    assert len(describe_python(python)["dists"]) >= 197
    constraints = ["-c", str(REPO / "requirements" / "gpu-image.txt")]
    for extra in (offline(wheelhouse), [*offline(wheelhouse), *constraints]):
        installs, changed = resolution(python, extra)
        print(f"pip install --dry-run {' '.join(extra)} afd-e2e on the GPU image's freeze: {installs}")
        assert changed == []
        assert [canonical(i.split("==")[0]) for i in installs] == ["afd-e2e", "py-spy"]


def test_an_image_older_than_a_lower_bound_is_named_as_the_change(tmp_path, wheelhouse):
    python = gpu_image_venv(tmp_path / "old-image", {"pyyaml": "6.0.1"})
    installs, changed = resolution(python, offline(wheelhouse))
    assert changed == ["pyyaml 6.0.1 -> 6.0.3"]
    assert installs == ["PyYAML==6.0.3", f"afd-e2e=={__version__}", "py-spy==0.4.3"]
