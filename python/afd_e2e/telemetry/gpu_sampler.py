"""Per GPU, once a second from NVML: utilisation, memory used, power. One handle per device, opened once.

On a machine without NVML (the CPU engine) ``GpuSampler.open`` returns None and the timeline has no GPU rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from afd_e2e.gpu.nvml import MIB


@dataclass(frozen=True)
class GpuSample:
    index: int
    util_pct: float | None
    memory_used_mib: float | None
    power_w: float | None


class GpuSampler:
    """NVML initialised for the sampler's life; ``read()`` one sample per device, ``close()`` at the end."""

    def __init__(self, pynvml: Any, indices: Sequence[int]) -> None:
        self._nvml = pynvml
        self._handles = [(index, pynvml.nvmlDeviceGetHandleByIndex(index)) for index in indices]

    @classmethod
    def open(cls, indices: Sequence[int]) -> GpuSampler | None:
        """None without devices or without NVML (skipped cleanly on the CPU)."""
        if not indices:
            return None
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception:  # ImportError, NVMLError (no driver): no GPU rows, nothing else changes
            return None
        try:
            return cls(pynvml, indices)
        except Exception:
            pynvml.nvmlShutdown()
            return None

    def read(self) -> list[GpuSample]:
        samples = []
        for index, handle in self._handles:
            samples.append(
                GpuSample(
                    index,
                    self._call(lambda h=handle: float(self._nvml.nvmlDeviceGetUtilizationRates(h).gpu)),
                    self._call(lambda h=handle: round(self._nvml.nvmlDeviceGetMemoryInfo(h).used / MIB, 1)),
                    self._call(lambda h=handle: self._nvml.nvmlDeviceGetPowerUsage(h) / 1000.0),
                )
            )
        return samples

    def _call(self, read: Any) -> float | None:
        try:
            return read()
        except Exception:  # one reading an agent's driver does not offer: that figure is None
            return None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()
