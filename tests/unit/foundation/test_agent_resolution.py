"""afd-e2e installs beside vLLM 0.26 on the GPU image without changing any package the image has.

Offline, from real captures (tests/fixtures/agent_env/, README there): the image's exact package set (its
`pip list --format=freeze`), the dependency wheels the kit bundles beside vLLM 0.26.0 and vLLM 0.26.0's own
metadata. Every requirement of afd-e2e (it has no engine extra: vLLM and torch are the image's), evaluated for
CPython 3.12 on Linux x86-64, must be met by the version that environment already has (or name a package it lacks,
which would be added); where vLLM asks for the same package, that version must meet vLLM's requirement too; and the
GPU image's constraints file (requirements/gpu-image.txt) pins exactly the image's versions. vLLM's own disagreements with the image (the kit
puts vLLM on PYTHONPATH beside the image's numba) are listed, not blamed on afd-e2e. `pytest -s` prints the summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from email.parser import Parser

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from afd_e2e import __version__
from repo_paths import FIXTURES, REPO

AGENT_ENV = FIXTURES / "agent_env"
# The GPU image: CPython 3.12.3, Linux x86-64 (../shared/gpu-vllm/README.md).
CPYTHON_312_LINUX = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
}


def exact_versions(text: str) -> dict[str, str]:
    """name -> version of NAME==VERSION lines ('#' comments skipped)."""
    found = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            found[canonicalize_name(name)] = version
    return found


def gpu_environment() -> dict[str, str]:
    """The kit's environment on the device: the image's packages, the bundled wheels and vLLM itself."""
    environment = exact_versions((AGENT_ENV / "image-freeze.txt").read_text())
    environment |= exact_versions((AGENT_ENV / "vllm-bundle-wheels.txt").read_text())
    return environment


def image_packages() -> dict[str, str]:
    return exact_versions((AGENT_ENV / "image-freeze.txt").read_text())


def vllm_requirements() -> list[Requirement]:
    metadata = Parser().parsestr((AGENT_ENV / "vllm-0.26.0.METADATA").read_text())
    assert (metadata["Name"], metadata["Version"]) == ("vllm", "0.26.0")
    requirements = [Requirement(line) for line in metadata.get_all("Requires-Dist")]
    return [r for r in requirements if r.marker is None or r.marker.evaluate({**CPYTHON_312_LINUX, "extra": ""})]


def afd_e2e_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = [Requirement(line) for line in project["dependencies"]]
    return [r for r in requirements if r.marker is None or r.marker.evaluate({**CPYTHON_312_LINUX, "extra": ""})]


@dataclass
class Resolution:
    """What installing afd-e2e would do to the environment."""

    kept: dict[str, str] = field(default_factory=dict)  # name -> the environment's version, which meets the range
    changed: list[str] = field(default_factory=list)  # each: the package, its version, the range that excludes it
    added: list[str] = field(default_factory=list)  # requirements the environment has no package for
    vllm_disagrees: list[str] = field(default_factory=list)  # vLLM's own requirement outside a shared package

    def summary(self, image: dict[str, str]) -> str:
        changed_in_image = [c for c in self.changed if c.split()[0] in image]
        return (
            f"afd-e2e {__version__} beside vLLM 0.26.0 on the GPU image ({len(image)} packages, CPython 3.12): "
            f"{len(changed_in_image)} image packages changed, {len(self.changed)} environment packages changed, "
            f"{len(self.added)} added; kept: " + ", ".join(f"{n} {v}" for n, v in sorted(self.kept.items()))
        )


def resolve(requirements: list[Requirement], environment: dict[str, str], vllm: list[Requirement]) -> Resolution:
    """Check each requirement against the version the environment already has (pip would keep it: no change)."""
    result = Resolution()
    vllm_by_name = {canonicalize_name(r.name): r for r in vllm}
    for requirement in requirements:
        name = canonicalize_name(requirement.name)
        version = environment.get(name)
        if version is None:
            result.added.append(str(requirement))
            continue
        if not requirement.specifier.contains(version, prereleases=True):
            result.changed.append(f"{name} {version} (afd-e2e asks {requirement.specifier})")
            continue
        result.kept[name] = version
        theirs = vllm_by_name.get(name)
        if theirs is not None and not theirs.specifier.contains(version, prereleases=True):
            result.vllm_disagrees.append(f"{name} {version} (vLLM asks {theirs.specifier})")
    return result


def test_afd_e2e_installs_beside_vllm_026_without_changing_the_image():
    image = image_packages()
    resolution = resolve(afd_e2e_requirements(), gpu_environment() | {"vllm": "0.26.0"}, vllm_requirements())
    summary = resolution.summary(image)
    print(summary)
    assert resolution.changed == [], summary
    # The one package the image lacks is py-spy (forensics' stack dumps): a self-contained binary wheel with no
    # dependencies, so adding it moves nothing that is there.
    assert resolution.added == ["py-spy>=0.4.0"], summary
    assert resolution.vllm_disagrees == []
    assert summary.count(" 0 image packages changed") == 1
    assert set(resolution.kept) == {"pyyaml", "requests", "psutil", "nvidia-ml-py", "matplotlib", "prometheus-client"}


def test_the_exact_pins_afd_e2e_had_would_change_three_image_packages():
    """The check fails for the real cause the issue found: 0.1.0's exact pins move three of the image's packages."""
    pinned = [
        Requirement(r)
        for r in ("pyyaml==6.0.4", "requests==2.34.2", "psutil==7.2.2", "nvidia-ml-py==13.580.82", "matplotlib==3.10.7")
    ]
    resolution = resolve(pinned, gpu_environment(), vllm_requirements())
    assert resolution.changed == [
        "pyyaml 6.0.3 (afd-e2e asks ==6.0.4)",
        "nvidia-ml-py 13.610.43 (afd-e2e asks ==13.580.82)",
        "matplotlib 3.11.2 (afd-e2e asks ==3.10.7)",
    ]
    assert "3 image packages changed" in resolution.summary(image_packages())


def test_vllm_026_shares_the_requirements_afd_e2e_meets():
    """vLLM asks for requests, psutil, pyyaml and prometheus_client too; the image's versions meet both."""
    shared = {canonicalize_name(r.name) for r in vllm_requirements()} & {
        canonicalize_name(r.name) for r in afd_e2e_requirements()
    }
    assert shared == {"requests", "psutil", "pyyaml", "prometheus-client"}


def test_vllms_own_disagreements_with_the_image_are_not_afd_e2es():
    """The kit does not pip-install vLLM: its numba pin differs from the image's, whatever afd-e2e asks."""
    image = image_packages()
    outside = [
        r.name
        for r in vllm_requirements()
        if canonicalize_name(r.name) in image and not r.specifier.contains(image[canonicalize_name(r.name)], True)
    ]
    assert "numba" in outside
    assert not {canonicalize_name(n) for n in outside} & {canonicalize_name(r.name) for r in afd_e2e_requirements()}


def test_afd_e2e_has_no_engine_extra():
    """An extra asking for vllm/torch would let `pip install afd-e2e[gpu]` replace the image's engine (a dry run of
    the old one moved numba, numpy, protobuf, setuptools and llvmlite and added 53 packages)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert set(project["optional-dependencies"]) == {"dev"}
    assert not {canonicalize_name(r.name) for r in afd_e2e_requirements()} & {"vllm", "torch"}


def test_the_gpu_image_constraints_pin_the_images_own_versions():
    """requirements/gpu-image.txt: every pin is the image's version (so installing with it can keep only what is
    there) and lies inside afd-e2e's range; only py-spy, which the image lacks, is pinned to a version of ours."""
    constraints = exact_versions((REPO / "requirements" / "gpu-image.txt").read_text())
    image = gpu_environment() | {"vllm": "0.26.0"}
    assert {n: v for n, v in constraints.items() if n in image and image[n] != v} == {}
    assert set(constraints) - set(image) == {"py-spy"}
    for requirement in afd_e2e_requirements():
        name = canonicalize_name(requirement.name)
        assert requirement.specifier.contains(constraints[name]), f"{name}=={constraints[name]} outside {requirement}"
