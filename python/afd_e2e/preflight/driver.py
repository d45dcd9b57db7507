"""Where the NVIDIA driver and the CUDA version it supports are checked against the profile's minimums."""

from __future__ import annotations

from afd_e2e.gpu.inventory import Inventory, version_tuple
from afd_e2e.preflight.checks import WARN, PreflightCheck, failed, passed, skipped
from afd_e2e.profile import HardwareSpec

DRIVER, CUDA = "nvidia driver", "cuda"


def check_driver(
    hardware: HardwareSpec, inventory: Inventory | None, why_none: str, *, gpu_expected: bool
) -> list[PreflightCheck]:
    """``why_none`` says why there is no inventory: the profile runs on the CPU, or NVML could not start."""
    if inventory is None:
        if not gpu_expected:
            return [skipped(DRIVER, why_none), skipped(CUDA, why_none)]
        fix = "install the NVIDIA driver (nvidia-smi must list the GPUs) and nvidia-ml-py (pip install nvidia-ml-py)"
        return [failed(DRIVER, why_none, "an NVIDIA driver NVML can talk to", fix), skipped(CUDA, "needs the driver")]
    return [_driver(hardware, inventory.driver), _cuda(hardware, inventory.cuda)]


def _driver(hardware: HardwareSpec, driver: str) -> PreflightCheck:
    wanted = f">= {hardware.min_driver}" if hardware.min_driver else "any"
    if hardware.min_driver and version_tuple(driver) < version_tuple(hardware.min_driver):
        return failed(DRIVER, driver, wanted, f"upgrade the NVIDIA driver to {hardware.min_driver} or newer")
    return passed(DRIVER, driver, wanted)


def _cuda(hardware: HardwareSpec, cuda: str | None) -> PreflightCheck:
    wanted = f">= {hardware.min_cuda}" if hardware.min_cuda else "any"
    if cuda is None:
        return PreflightCheck(CUDA, WARN, "NVML did not report the CUDA driver version", wanted, "update nvidia-ml-py")
    if hardware.min_cuda and version_tuple(cuda) < version_tuple(hardware.min_cuda):
        return failed(CUDA, cuda, wanted, f"install a driver that supports CUDA {hardware.min_cuda} or newer")
    return passed(CUDA, cuda, wanted)
