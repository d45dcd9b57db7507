"""Buildkite agent tags derived from the hardware, and the rule that says whether an agent's tags satisfy a step's.

Provisioning starts agents with ``buildkite-agent start --tags "$(afd-e2e agent-tags)"``; profiles (``agent_tags``)
and the pipeline generator target them. Matching follows Buildkite's agent targeting: every wanted key must be on the
agent with a value the wanted one matches as a glob (``"*"``: any value; ``"nvidia-h*"``: any H-series).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping

from afd_e2e.gpu.inventory import Inventory
from afd_e2e.gpu.topology import NVLINK, PCIE, UNKNOWN, Link

# The keys hardware_tags derives, in the order they are printed.
HARDWARE_KEYS = ("gpu", "gpus", "gpu_memory_gib", "interconnect", "nvidia_driver", "cuda")


def model_slug(name: str) -> str:
    """ "NVIDIA H200" -> "nvidia-h200"; "NVIDIA RTX PRO 6000 Blackwell Server Edition" -> "nvidia-rtx-pro-6000-..."."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def hardware_tags(inventory: Inventory) -> dict[str, str]:
    """Tags for an agent owning every GPU of the machine; empty without GPUs.

    gpu: model slug (slugs joined by ``+`` on a mixed machine); gpus: count; gpu_memory_gib: the smallest GPU's
    memory in whole GiB; interconnect: ``nvlink`` when every pair of GPUs has NVLink, ``pcie`` when some pair is
    known to have none, ``unknown`` when some pair could not be placed (never guessed as ``pcie``);
    nvidia_driver: the driver's major version; cuda: the CUDA version the driver supports.
    """
    if not inventory.gpus:
        return {}
    tags = {
        "gpu": "+".join(sorted({model_slug(g.name) for g in inventory.gpus})),
        "gpus": str(len(inventory.gpus)),
        "gpu_memory_gib": str(min(g.memory_total_mib for g in inventory.gpus) // 1024),
        "interconnect": interconnect_tag(list(inventory.links.values())),
        "nvidia_driver": inventory.driver.split(".")[0],
    }
    if inventory.cuda:
        tags["cuda"] = inventory.cuda
    return tags


def interconnect_tag(links: list[Link]) -> str:
    kinds = {link.kind for link in links}
    if PCIE in kinds:
        return PCIE
    return UNKNOWN if UNKNOWN in kinds else NVLINK


def format_tags(tags: Mapping[str, str]) -> str:
    """``key=value,key=value`` as ``buildkite-agent start --tags`` takes it."""
    return ",".join(f"{key}={value}" for key, value in tags.items())


def tags_satisfy(agent_tags: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    """True when an agent with ``agent_tags`` would take a step targeting ``wanted``."""
    return not unmet_tags(agent_tags, wanted)


def unmet_tags(agent_tags: Mapping[str, str], wanted: Mapping[str, str]) -> dict[str, str]:
    """The wanted tags the agent lacks or has with another value (empty when it satisfies them)."""
    return {
        key: value
        for key, value in wanted.items()
        if key not in agent_tags or not fnmatch.fnmatchcase(str(agent_tags[key]), str(value))
    }
