"""The PreflightCheck record every family returns, and the report that holds them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from afd_e2e.errors import EXIT_FAILED, EXIT_PASSED

if TYPE_CHECKING:
    from afd_e2e.preflight.software import InstalledSoftware

from afd_e2e.results.codec import to_json
from afd_e2e.results.model import Hardware, PreflightCheck
from afd_e2e.results.status import Status

PASS, WARN, FAIL, SKIP = Status.PASSED, Status.WARNED, Status.FAILED, Status.SKIPPED


def passed(name: str, measured: str, wanted: str = "") -> PreflightCheck:
    return PreflightCheck(name, PASS, measured, wanted)


def failed(name: str, measured: str, wanted: str, fix: str) -> PreflightCheck:
    return PreflightCheck(name, FAIL, measured, wanted, fix)


def skipped(name: str, reason: str) -> PreflightCheck:
    return PreflightCheck(name, SKIP, reason)


@dataclass(frozen=True)
class PreflightReport:
    profile: str
    devices: tuple[int, ...]
    checks: tuple[PreflightCheck, ...]
    hardware: Hardware | None  # the inventory (GPUs, link matrix), None without NVML
    software: InstalledSoftware | None = None  # both interpreters and what vLLM's reported

    @property
    def fits(self) -> bool:
        return all(check.status != FAIL for check in self.checks)

    @property
    def exit_code(self) -> int:
        return EXIT_PASSED if self.fits else EXIT_FAILED

    def count(self, status: Status) -> int:
        return sum(1 for check in self.checks if check.status == status)

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "devices": list(self.devices),
            "fits": self.fits,
            "checks": [{**asdict(check), "status": check.status.value} for check in self.checks],
            "hardware": to_json(self.hardware),
            "software": self.software.to_dict() if self.software is not None else None,
        }
