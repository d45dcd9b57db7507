"""Flags and resolution shared by several subcommands (profile, devices, model path)."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from afd_e2e.errors import UsageError
from afd_e2e.gates import parse_devices
from afd_e2e.plan import RunPlan, build_plan
from afd_e2e.profile import Profile, load_profile


def add_profile_args(parser: argparse.ArgumentParser, *, cases: bool = True) -> None:
    parser.add_argument(
        "--profile", required=True, help="a shipped profile name (see `afd-e2e profiles`) or a .yaml path"
    )
    parser.add_argument("--devices", help="comma-separated GPU ids, overriding the profile's devices env gate")
    parser.add_argument("--model", help="checkpoint directory, overriding the profile's model env gate")
    parser.add_argument("--port-base", type=int, help="first API port (default: the profile's engine.port_base)")
    if cases:
        parser.add_argument("--case", action="append", default=[], metavar="ID", help="run only this case (repeatable)")
        parser.add_argument(
            "--forced-routing-control",
            action="store_true",
            help="also benchmark each AFD performance candidate with afd_balanced forced routing, "
            "labelled a control and kept out of the verdict (one more model load each)",
        )


def resolve_devices(profile: Profile, flag: str | None) -> tuple[int, ...]:
    """--devices, else the profile's devices env gate, else the profile's default order."""
    env_name = profile.gates.devices_env
    raw, source = (flag, "--devices") if flag else (os.environ.get(env_name or "", ""), env_name or "")
    if not raw or not profile.device_count:
        if flag and not profile.device_count:
            raise UsageError(f"--devices={flag} given but profile {profile.name} runs on the CPU", "drop --devices")
        return profile.default_devices
    return parse_devices(raw, profile.device_count, source)


MAX_PORT = 65535
KERNEL_FILESYSTEMS = (Path("/proc"), Path("/sys"), Path("/dev"))


def check_port_base(port_base: int | None) -> None:
    if port_base is not None and not 1 <= port_base <= MAX_PORT:
        raise UsageError(
            f"--port-base {port_base} is outside 1..{MAX_PORT}, the TCP port range",
            "pass a port base such that the whole plan fits below 65536, e.g. 20000",
        )


def check_out_dir(out: Path) -> None:
    """The results folder can be created and written: not on a kernel filesystem, not a file, not below a file."""
    resolved = Path(os.path.abspath(out))
    kernel = next((k for k in KERNEL_FILESYSTEMS if resolved == k or k in resolved.parents), None)
    fix = "pass --out a folder on a writable disk, e.g. afd-e2e-out"
    if kernel is not None:
        raise UsageError(f"--out {out} is under {kernel}, a kernel filesystem, not a disk", fix)
    if resolved.exists() and not resolved.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder", fix)
    blocking = next((p for p in resolved.parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise UsageError(f"--out {out} is below {blocking}, which is a file", fix)
    try:
        resolved.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=resolved):
            pass
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write there ({exc.strerror or exc})", fix) from exc


def resolve_model(profile: Profile, flag: str | None) -> str | None:
    return flag or os.environ.get(profile.gates.model_env) or None


def plan_from_args(args: argparse.Namespace) -> tuple[Profile, RunPlan]:
    profile = load_profile(args.profile)
    check_port_base(args.port_base)
    model = resolve_model(profile, args.model) or f"${{{profile.gates.model_env}}}"
    devices = resolve_devices(profile, args.devices)
    plan = build_plan(
        profile,
        model_path=model,
        devices=devices,
        case_ids=args.case,
        port_base=args.port_base,
        forced_routing_control=args.forced_routing_control,
    )
    return profile, plan
