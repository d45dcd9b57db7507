"""What a run records about its machine: GPUs, driver, CUDA and topology from NVML, the checkpoint's identity."""

from __future__ import annotations

import json
from pathlib import Path

from afd_e2e.gpu.nvml import NvmlUnavailable
from afd_e2e.gpu.recorded import recorded_machine
from afd_e2e.results.model import Environment
from afd_e2e.runner.environment import gpu_environment

CAPTURE = Path(__file__).resolve().parents[2] / "fixtures" / "gpu" / "h200x2-captured" / "pynvml.json"


def test_gpu_environment_from_a_captured_h200_pair():
    env = gpu_environment((0, 1), recorded_machine(CAPTURE))
    assert env.driver == json.loads(CAPTURE.read_text())["driver"] and env.cuda == "13.0"
    assert [(g.index, g.name) for g in env.gpus] == [(0, "NVIDIA H200"), (1, "NVIDIA H200")]
    assert env.topology == "0-1 NV18"


def test_gpu_environment_says_why_without_nvml():
    def no_nvml():
        raise NvmlUnavailable("NVML cannot initialise: no driver")

    assert gpu_environment((0, 1), no_nvml) == Environment(topology="not probed: NVML cannot initialise: no driver")
