"""The Check record every family returns, and the report that holds them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from afd_e2e.results.status import Status

PASS, WARN, FAIL, SKIP = Status.PASSED, Status.WARNED, Status.FAILED, Status.SKIPPED


@dataclass(frozen=True)
class Check:
    """One verdict: ``measured`` is what this agent has, ``wanted`` what the profile asks, ``fix`` how to mend it."""

    name: str
    status: Status
    measured: str
    wanted: str = ""
    fix: str = ""


def passed(name: str, measured: str, wanted: str = "") -> Check:
    return Check(name, PASS, measured, wanted)


def failed(name: str, measured: str, wanted: str, fix: str) -> Check:
    return Check(name, FAIL, measured, wanted, fix)


def skipped(name: str, reason: str) -> Check:
    return Check(name, SKIP, reason)


@dataclass(frozen=True)
class PreflightReport:
    profile: str
    devices: tuple[int, ...]
    checks: tuple[Check, ...]
    hardware: dict[str, Any] | None  # the inventory (GPUs, link matrix), None without NVML

    @property
    def fits(self) -> bool:
        return all(check.status != FAIL for check in self.checks)

    @property
    def exit_code(self) -> int:
        return 0 if self.fits else 1

    def count(self, status: Status) -> int:
        return sum(1 for check in self.checks if check.status == status)

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "devices": list(self.devices),
            "fits": self.fits,
            "checks": [{**asdict(check), "status": check.status.value} for check in self.checks],
            "hardware": self.hardware,
        }
