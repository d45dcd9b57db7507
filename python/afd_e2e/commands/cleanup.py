"""``afd-e2e cleanup``: end what a run left behind and verify ports and GPU memory. Exit 0 when the machine is clean."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
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
        help="finish within S seconds of this command's start (a cancelled job's grace period): shorter waits "
        "before SIGKILL and checks",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from afd_e2e.results.status import Status
    from afd_e2e.runner.cleanup import clean_up

    if args.within is not None and args.within <= 0:
        raise UsageError(f"--within={args.within:g} is not positive", "give the seconds left, e.g. --within 8")
    refuse_a_file(args.out, "--out", "pass --out the results folder of the run to clean up (default afd-e2e-out)")
    checks = clean_up(args.out, None if args.within is None else left_of(args.within))
    for check in checks:
        print(f"cleanup {check.check}: {check.status} - {check.detail}")
    return 1 if any(check.status is Status.FAILED for check in checks) else 0


def left_of(within_s: float, *, now: Callable[[], float] = time.time, started_at: float | None = None) -> float:
    """What is left of ``within_s`` once this process is running: the budget counts from the process's start
    (``started_at``, default the OS's record of it), since the hook that gave it counts from there too. Starting
    Python and importing cost a loaded machine seconds; a budget that began after them would overrun the hook's
    bound by as much, and be killed before its port and GPU checks."""
    if started_at is None:
        import psutil  # as run()'s imports: only the command that needs it pays for it

        started_at = psutil.Process().create_time()
    return max(0.0, within_s - max(0.0, now() - started_at))
