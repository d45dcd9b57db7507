"""Run every preflight check for a profile and plan: read the machine once, then judge family by family."""

from __future__ import annotations

import time
from collections.abc import Callable

from afd_e2e.gpu.inventory import Inventory, build_inventory
from afd_e2e.gpu.machine_probe import read_machine
from afd_e2e.gpu.nvml import NvmlUnavailable
from afd_e2e.gpu.readings import MachineReadings
from afd_e2e.plan import RunPlan
from afd_e2e.preflight.checkpoint import check_checkpoint
from afd_e2e.preflight.checks import PreflightReport
from afd_e2e.preflight.driver import check_driver
from afd_e2e.preflight.free_ports import check_plan_ports, plan_ports
from afd_e2e.preflight.gpus import check_gpus
from afd_e2e.preflight.idle import check_idle
from afd_e2e.preflight.interconnect import check_interconnect
from afd_e2e.preflight.plugin_config import Ask, ask_installed_plugin, check_plugin_config
from afd_e2e.preflight.proof import check_proof
from afd_e2e.preflight.software import InstalledSoftware, check_software, control_env, read_installed
from afd_e2e.preflight.stack_dumps import check_stack_dumps
from afd_e2e.profile import Profile
from afd_e2e.results.model import PreflightCheck, PreflightRecord
from afd_e2e.results.status import Status
from afd_e2e.system.pids import describe_pid
from afd_e2e.system.ports import busy_ports


def read_inventory(profile: Profile, read_hardware: Callable[[], MachineReadings]) -> tuple[Inventory | None, str]:
    """The machine's inventory, or None and why (a CPU profile, or no NVML)."""
    if profile.platform == "cpu":
        return None, f"profile {profile.name} runs on the CPU"
    try:
        return build_inventory(read_hardware()), ""
    except NvmlUnavailable as exc:
        return None, str(exc)


def hardware_checks(
    profile: Profile, plan: RunPlan, inventory: Inventory | None, why_none: str
) -> list[PreflightCheck]:
    """The GPU families: driver and CUDA, GPUs, interconnect, idle devices."""
    hardware = profile.hardware
    return [
        *check_driver(hardware, inventory, why_none, gpu_expected=profile.platform == "cuda"),
        *check_gpus(hardware, plan.devices, profile.agent_tags, inventory, why_none),
        *check_interconnect(hardware, plan, inventory, why_none),
        *check_idle(plan.devices, inventory, why_none, describe_pid),
    ]


def run_preflight(
    profile: Profile,
    plan: RunPlan,
    *,
    model_path: str | None,
    read_hardware: Callable[[], MachineReadings] = read_machine,
    installed: InstalledSoftware | None = None,
    stack_dumps: Callable[[], list[PreflightCheck]] = check_stack_dumps,
    ask_plugin: Ask = ask_installed_plugin,
) -> PreflightReport:
    inventory, why_none = read_inventory(profile, read_hardware)
    installed = installed or read_installed(profile.engine.executable, routing_env=control_env(plan))
    checks = [
        *hardware_checks(profile, plan, inventory, why_none),
        *check_plan_ports(plan, profile.engine.host, busy_ports(plan_ports(plan), profile.engine.host)),
        *check_checkpoint(profile.model.checkpoint, model_path, profile.gates.model_env, plan),
        *check_software(profile, plan, installed),
        check_plugin_config(profile, plan, installed, ask_plugin),
        *check_proof(profile, plan),
        *stack_dumps(),
    ]
    return PreflightReport(
        profile=profile.name,
        devices=plan.devices,
        checks=tuple(checks),
        hardware=inventory.hardware() if inventory is not None else None,
        software=installed,
    )


def preflight_record(
    report: PreflightReport, *, software: dict[str, str | None] | None = None, seconds: float | None = None
) -> PreflightRecord:
    """The report as results.json stores it: every check, the GPU inventory and link matrix, the software found."""
    return PreflightRecord(
        status=Status.PASSED if report.fits else Status.FAILED,
        profile=report.profile,
        devices=list(report.devices),
        checks=list(report.checks),
        hardware=report.hardware,
        software=dict(software or {}),
        seconds=seconds,
    )


def record_preflight(
    profile: Profile,
    plan: RunPlan,
    *,
    model_path: str | None,
    read_hardware: Callable[[], MachineReadings] = read_machine,
) -> PreflightRecord:
    """``run_preflight`` as a run records it at its start, timed, with the software it found."""
    started = time.monotonic()
    installed = read_installed(profile.engine.executable, routing_env=control_env(plan))
    report = run_preflight(profile, plan, model_path=model_path, read_hardware=read_hardware, installed=installed)
    return preflight_record(report, software=installed.to_record(), seconds=round(time.monotonic() - started, 3))
