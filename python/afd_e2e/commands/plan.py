"""``afd-e2e plan``: the processes each case launches, as paste-able shell or as JSON."""

from __future__ import annotations

import argparse
import json

from afd_e2e.commands.common import add_profile_args, plan_from_args
from afd_e2e.plan.render import render_text


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("plan", help="show each case's processes, argv, env and ports in launch order")
    add_profile_args(parser)
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    _, plan = plan_from_args(args)
    print(json.dumps(plan.to_dict(), indent=2) if args.json else render_text(plan), end="" if not args.json else "\n")
    return 0
