"""Flags and resolution shared by several subcommands (profile, devices, model path)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from afd_e2e.errors import UsageError
from afd_e2e.plan import RunPlan, build_plan
from afd_e2e.plan.gates import plan_devices, requested_model
from afd_e2e.preflight.software import installed_vllm_version
from afd_e2e.profile import Profile, load_profile
from afd_e2e.runner.admission import check_port_base


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


def resolve_model(profile: Profile, flag: str | None) -> str | None:
    return requested_model(profile, os.environ, flag) or None


def plan_from_args(args: argparse.Namespace, vllm_version: str | None = None) -> tuple[Profile, RunPlan]:
    """The plan the flags ask for, its argv for ``vllm_version`` (default: the installed vLLM's, as a run's)."""
    profile = load_profile(args.profile)
    check_port_base(args.port_base)
    model = resolve_model(profile, args.model) or f"${{{profile.gates.model_env}}}"
    devices = plan_devices(profile, os.environ, args.devices)
    plan = build_plan(
        profile,
        model_path=model,
        devices=devices,
        case_ids=args.case,
        port_base=args.port_base,
        forced_routing_control=args.forced_routing_control,
        vllm_version=vllm_version or installed_vllm_version(profile.engine.executable),
    )
    return profile, plan


def refuse_a_file(path: Path, name: str, fix: str) -> None:
    """A folder argument that names a file: one line saying so, with the fix that fits (not a permissions hint)."""
    if path.is_file():
        raise UsageError(f"{name} {path} is a file, not a folder", fix)
