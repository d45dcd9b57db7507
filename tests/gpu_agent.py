"""What the GPU tests share: why this machine cannot run them (None when it can: the GPUs, the kit's vLLM, the
checkpoint, the AFD plugin), and ``afd-e2e`` as a subprocess with this repository's package first on PYTHONPATH (the
caller's paths kept: the GPU kit's vLLM needs them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from afd_e2e.gpu.memory import read_device_memory
from afd_e2e.gpu.nvml import NvmlUnavailable, nvml

REPO = Path(__file__).resolve().parents[1]


def why_not_gpus(count: int) -> str | None:
    """Why there are not ``count`` NVIDIA GPUs here (devices 0 to count - 1, as NVML answers); None when there are."""
    try:
        with nvml() as pynvml:
            here = pynvml.nvmlDeviceGetCount()
        gpus = read_device_memory(list(range(min(count, here))))
    except NvmlUnavailable as exc:
        return f"no NVIDIA GPU here: {exc}"
    if len(gpus) < count:
        return f"needs {count} NVIDIA GPU(s), this machine has {here}"
    return None


def why_not_kit(model: str) -> str | None:
    """Why the GPU kit cannot serve ``model`` here: no ``vllm`` executable, no checkpoint; None when it can."""
    if shutil.which("vllm") is None:
        return "no vllm executable on PATH (source /tmp/vl/env.sh)"
    if not Path(model, "config.json").is_file():
        return f"no checkpoint at {model} (set AFD_GPU_E2E_MODEL)"
    return None


def why_not_two_gpu_afd(*required_env: str) -> str | None:
    """The first missing piece: 2 NVIDIA GPUs, vLLM in this Python, the AFD plugin registered, each required env var."""
    if reason := why_not_gpus(2):
        return reason
    try:
        metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return "vLLM is not installed in this Python"
    if not any(ep.name == "afd" for ep in metadata.entry_points(group="vllm.general_plugins")):
        return "the AFD plugin is not registered (entry point vllm.general_plugins: afd)"
    for name in required_env:
        if not os.environ.get(name):
            return f"{name} is not set"
    return None


def afd_e2e(*args: str, timeout: float, devices: str = "0,1") -> subprocess.CompletedProcess:
    """``afd-e2e ARGS`` on ``devices`` with the GPU backend opted in; output goes to the terminal."""
    pythonpath = os.pathsep.join(filter(None, [str(REPO / "python"), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "AFD_E2E_BACKEND": "gpu", "AFD_E2E_DEVICES": devices}
    return subprocess.run([sys.executable, "-m", "afd_e2e", *args], env=env, timeout=timeout, check=False, text=True)
