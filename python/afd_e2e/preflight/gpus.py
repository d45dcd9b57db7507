"""Where the GPUs are checked: how many, the plan's device ids exist, memory per GPU, the model allow-list, and
whether the hardware carries the agent tags the profile's pipeline step targets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from afd_e2e.buildkite.agent_tags import HARDWARE_KEYS, format_tags, hardware_tags, model_slug, unmet_tags
from afd_e2e.gpu.inventory import Inventory
from afd_e2e.preflight.checks import WARN, PreflightCheck, failed, passed, skipped
from afd_e2e.profile import HardwareSpec
from afd_e2e.results.model import HardwareGpu

COUNT, DEVICES, MEMORY, MODELS, TAGS = "gpu count", "devices", "gpu memory", "gpu models", "agent tags"


def check_gpus(
    hardware: HardwareSpec,
    devices: Sequence[int],
    agent_tags: Mapping[str, str],
    inventory: Inventory | None,
    why_none: str,
) -> list[PreflightCheck]:
    if inventory is None:
        return [skipped(name, why_none) for name in (COUNT, DEVICES, MEMORY, MODELS, TAGS)]
    present = [inventory.gpus[d] for d in devices if inventory.gpu(d) is not None]
    return [
        _count(hardware, inventory),
        _devices(devices, inventory),
        _memory(hardware, present),
        _models(hardware, present),
        _tags(agent_tags, inventory),
    ]


def _count(hardware: HardwareSpec, inventory: Inventory) -> PreflightCheck:
    count, wanted = len(inventory.gpus), f">= {hardware.gpus}"
    if count < hardware.gpus:
        return failed(
            COUNT, f"{count} GPUs", wanted, f"run on an agent with {hardware.gpus} GPUs (tag gpus={hardware.gpus})"
        )
    return passed(COUNT, f"{count} GPUs", wanted)


def _devices(devices: Sequence[int], inventory: Inventory) -> PreflightCheck:
    listed = ",".join(map(str, devices))
    missing = [d for d in devices if inventory.gpu(d) is None]
    if missing:
        return failed(
            DEVICES,
            f"GPU {','.join(map(str, missing))} not on this machine (it has GPUs 0-{len(inventory.gpus) - 1})",
            f"GPUs {listed}",
            f"list ids between 0 and {len(inventory.gpus) - 1} in --devices or the profile's devices env gate",
        )
    return passed(DEVICES, f"GPUs {listed} present", f"GPUs {listed}")


def _memory(hardware: HardwareSpec, gpus: list[HardwareGpu]) -> PreflightCheck:
    wanted = f">= {hardware.min_memory_mib} MiB per GPU"
    small = [g for g in gpus if g.memory_total_mib < hardware.min_memory_mib]
    if small:
        measured = ", ".join(f"GPU{g.index} {g.memory_total_mib} MiB" for g in small)
        return failed(MEMORY, measured, wanted, f"use GPUs with at least {hardware.min_memory_mib} MiB each")
    lowest = min((g.memory_total_mib for g in gpus), default=0)
    return passed(MEMORY, f"{lowest} MiB or more on each of {len(gpus)} GPUs", wanted)


def _models(hardware: HardwareSpec, gpus: list[HardwareGpu]) -> PreflightCheck:
    names = sorted({g.name for g in gpus})
    if not hardware.gpu_models:
        return passed(MODELS, ", ".join(names), "any model")
    allowed = {model_slug(m) for m in hardware.gpu_models}
    wanted = "one of: " + ", ".join(hardware.gpu_models)
    other = [n for n in names if model_slug(n) not in allowed]
    if other:
        return failed(
            MODELS, ", ".join(names), wanted, "run on an agent with an allowed GPU model, or extend gpu_models"
        )
    return passed(MODELS, ", ".join(names), wanted)


def _tags(agent_tags: Mapping[str, str], inventory: Inventory) -> PreflightCheck:
    """Only the hardware-derived keys can be judged here (``queue`` and the like are provisioning's choice)."""
    wanted = {k: v for k, v in agent_tags.items() if k in HARDWARE_KEYS}
    have = hardware_tags(inventory)
    if not wanted:
        return passed(TAGS, format_tags(have), "no hardware tags in the profile")
    unmet = unmet_tags(have, wanted)
    if unmet:
        fix = "start this agent with the tags `afd-e2e agent-tags` prints, or fix the profile's agent_tags"
        return PreflightCheck(TAGS, WARN, format_tags(have), format_tags(wanted), fix)
    return passed(TAGS, format_tags(have), format_tags(wanted))
