"""Flags and resolution shared by several subcommands (profile, devices, model path)."""

from __future__ import annotations

import argparse
import os

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
    devices, error = parse_devices(raw, profile.device_count, source)
    if error:
        problem, _, fix = error.partition("; fix: ")
        raise UsageError(problem, fix)
    return devices


def resolve_model(profile: Profile, flag: str | None) -> str | None:
    return flag or os.environ.get(profile.gates.model_env) or None


def plan_from_args(args: argparse.Namespace) -> tuple[Profile, RunPlan]:
    profile = load_profile(args.profile)
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
