"""``afd-e2e preflight``: does this agent fit the profile? Every check with status, measured, wanted and fix.

Exit 0 when the agent fits, 1 when it does not, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from afd_e2e.commands.common import add_profile_args, plan_from_args, resolve_model
from afd_e2e.gpu.machine_probe import read_machine
from afd_e2e.gpu.recorded import recorded_machine
from afd_e2e.preflight.report_text import render_report
from afd_e2e.preflight.run_checks import run_preflight


def add_readings_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--readings",
        type=Path,
        metavar="JSON",
        help="judge NVML readings recorded by scripts/capture-gpu-fixtures instead of this machine's GPUs",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "preflight", help="check driver, GPUs, interconnect, idle devices, ports, checkpoint and software"
    )
    add_profile_args(parser)
    add_readings_arg(parser)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    profile, plan = plan_from_args(args)
    report = run_preflight(
        profile,
        plan,
        model_path=resolve_model(profile, args.model),
        read_hardware=read_machine if args.readings is None else recorded_machine(args.readings),
    )
    print(json.dumps(report.to_dict(), indent=2) if args.json else render_report(report), end="\n" if args.json else "")
    return report.exit_code
