"""``afd-e2e cleanup``: end what a run left behind and verify ports and GPU memory. Exit 0 when the machine is clean."""

from __future__ import annotations

import argparse
from pathlib import Path

from afd_e2e.commands.common import refuse_a_file
from afd_e2e.errors import UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("cleanup", help="stop a run's leftover processes and verify ports and GPU memory")
    parser.add_argument("--out", type=Path, default=Path("afd-e2e-out"), help="the run's results folder")
    parser.add_argument(
        "--within",
        type=float,
        metavar="S",
        help="finish within S seconds (a cancelled job's grace period): shorter waits before SIGKILL and checks",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from afd_e2e.results.status import Status
    from afd_e2e.runner.cleanup import clean_up

    if args.within is not None and args.within <= 0:
        raise UsageError(f"--within={args.within:g} is not positive", "give the seconds left, e.g. --within 8")
    refuse_a_file(args.out, "--out", "pass --out the results folder of the run to clean up (default afd-e2e-out)")
    checks = clean_up(args.out, args.within)
    for check in checks:
        print(f"cleanup {check.check}: {check.status} - {check.detail}")
    return 1 if any(check.status is Status.FAILED for check in checks) else 0
