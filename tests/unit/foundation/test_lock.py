"""The lock CI and the embedded default install (requirements/ci-lock.txt) agrees with what afd-e2e asks for
(pyproject.toml's ranges, the dev extra) and with requirements/ci.in: refresh it with scripts/refresh-lock."""

from __future__ import annotations

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from repo_paths import REPO

LOCK = REPO / "requirements" / "ci-lock.txt"
REFRESH = "run scripts/refresh-lock"


def pins(text: str) -> dict[str, str]:
    """name -> exact version of a pip-compile output (comments and options skipped)."""
    found = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            requirement = Requirement(line)
            (specifier,) = requirement.specifier
            assert specifier.operator == "==", f"{line}: the lock holds exact versions only"
            found[canonicalize_name(requirement.name)] = specifier.version
    return found


def locked() -> dict[str, str]:
    return pins(LOCK.read_text())


def requirements_of(lines: list[str]) -> list[Requirement]:
    return [Requirement(line) for line in lines]


def pyproject_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return requirements_of(project["dependencies"] + project["optional-dependencies"]["dev"])


def ci_in_requirements() -> list[Requirement]:
    lines = [line.split("#", 1)[0].strip() for line in (REPO / "requirements" / "ci.in").read_text().splitlines()]
    return requirements_of([line for line in lines if line])


def disagreements(requirements: list[Requirement], lock: dict[str, str]) -> list[str]:
    problems = []
    for requirement in requirements:
        version = lock.get(canonicalize_name(requirement.name))
        if version is None:
            problems.append(f"{requirement} is not in the lock")
        elif not requirement.specifier.contains(version, prereleases=True):
            problems.append(f"{requirement} does not admit the lock's {requirement.name}=={version}")
    return problems


def test_the_lock_pins_every_pyproject_requirement_inside_its_range():
    assert disagreements(pyproject_requirements(), locked()) == [], REFRESH


def test_the_lock_pins_what_ci_in_asks_for():
    assert disagreements(ci_in_requirements(), locked()) == [], REFRESH


def test_a_range_the_lock_falls_outside_is_a_disagreement():
    lock = {"pyyaml": "6.0.4", "matplotlib": "3.10.7"}
    assert disagreements(requirements_of(["pyyaml>=6.0.5", "matplotlib>=3.10.0", "psutil>=7"]), lock) == [
        "pyyaml>=6.0.5 does not admit the lock's pyyaml==6.0.4",
        "psutil>=7 is not in the lock",
    ]


def test_the_lock_is_refreshed_by_its_one_command():
    assert "#    scripts/refresh-lock\n" in LOCK.read_text()
    assert "--index-url" not in LOCK.read_text() and "--find-links" not in LOCK.read_text()  # this machine's setup


def test_every_install_of_ci_and_the_embedded_default_is_constrained_by_the_lock():
    for script in ("install-cpu-vllm", "install-lm-eval"):
        text = (REPO / "scripts" / script).read_text()
        installs = [line for line in text.splitlines() if "pip install" in line and "--upgrade pip" not in line]
        assert installs, script
        assert all("-c " in line for line in installs), f"{script}: {installs}"
