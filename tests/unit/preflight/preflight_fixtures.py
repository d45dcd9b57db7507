"""Shared by the preflight unit tests: where the captures and hand-made fixtures live, and checkpoint folders.

A plain module (imported as ``preflight_fixtures``), so its name cannot collide with other folders' conftest.py."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from afd_e2e.gpu.readings import MachineReadings, load_readings
from afd_e2e.preflight.software import InstalledSoftware
from repo_paths import FIXTURES, SHARED

H200X2 = SHARED / "fixtures" / "gpu" / "h200x2"
GPU_FIXTURES = FIXTURES / "gpu"
TEST_PROFILE = FIXTURES / "profiles" / "h200x2-nvlink.yaml"
MIB = 1024 * 1024

QWEN35_CONFIG = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"],
    "model_type": "qwen3_5_moe",
    "text_config": {"model_type": "qwen3_5_moe_text", "num_experts": 256, "num_experts_per_tok": 8},
}


def h200x2_readings(*, with_reserved: bool = True) -> MachineReadings:
    """The captured 2x H200; its pynvml.json holds NVML v1 memory only, so the reserved MiB that the same
    capture's `nvidia-smi -q -x` shows (616 MiB per GPU) is added unless ``with_reserved`` is False."""
    readings = load_readings(H200X2 / "pynvml.json")
    if not with_reserved:
        return readings
    xml = (H200X2 / "nvidia-smi-q.xml").read_text(encoding="utf-8")
    reserved = [int(v) * MIB for v in re.findall(r"<reserved>(\d+) MiB</reserved>", xml)]
    gpus = tuple(replace(g, reserved_bytes=r) for g, r in zip(readings.gpus, reserved, strict=True))
    return replace(readings, gpus=gpus)


def write_checkpoint(
    folder: Path,
    config: Any,
    *,
    shards: int = 2,
    shard_bytes: int = 4096,
    tokenizer: bool = True,
    declared_size: int | None = None,
) -> Path:
    """A checkpoint folder: config.json, ``shards`` safetensors files and their index (or one model.safetensors
    when ``shards`` is 1), and tokenizer files."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(config if isinstance(config, str) else json.dumps(config), encoding="utf-8")
    if shards == 1:
        (folder / "model.safetensors").write_bytes(b"\0" * shard_bytes)
    else:
        names = [f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
        for name in names:
            (folder / name).write_bytes(b"\0" * shard_bytes)
        index = {
            "metadata": {"total_size": declared_size if declared_size is not None else shards * (shard_bytes - 8)},
            "weight_map": {f"layers.{i}.weight": name for i, name in enumerate(names)},
        }
        (folder / "model.safetensors.index.json").write_text(json.dumps(index), encoding="utf-8")
    if tokenizer:
        (folder / "tokenizer.json").write_text("{}", encoding="utf-8")
        (folder / "tokenizer_config.json").write_text("{}", encoding="utf-8")
    return folder


def installed_software(**changes: Any) -> InstalledSoftware:
    """What preflight's software probe reads on a GPU agent with vLLM 0.26 and the AFD plugin, with ``changes``."""
    base: dict[str, Any] = {
        "afd_e2e_python": "/opt/afd-e2e/bin/python",
        "vllm_executable": "/opt/venv/bin/vllm",
        "vllm_python": "/opt/venv/bin/python",
        "vllm": "0.26.0+cu130",
        "torch": "2.11.0+cu130",
        "afd_plugin": "afd_plugin:register",
        "routing_strategies": None,
        "problem": None,
        "nvidia_ml_py": "13.580.82",
    }
    return InstalledSoftware(**{**base, **changes})
