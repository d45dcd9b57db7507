"""``afd-e2e gates``: is this profile opted in by the environment? Exit 0 open, 3 closed, 2 malformed."""

from __future__ import annotations

import argparse
import json
import os

from afd_e2e.plan.gates import evaluate_gates
from afd_e2e.profile import load_profile


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("gates", help="evaluate the opt-in environment gates for a profile")
    parser.add_argument("--profile", required=True)
    parser.add_argument("--devices", help="override the devices env gate")
    parser.add_argument("--model", help="override the model env gate")
    parser.add_argument("--json", action="store_true", help="print the decision as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    decision = evaluate_gates(profile, os.environ, model_path=args.model, devices=args.devices)
    if args.json:
        print(
            json.dumps(
                {
                    "profile": profile.name,
                    "status": decision.status,
                    "reasons": list(decision.reasons),
                    "model_path": decision.model_path,
                    "devices": list(decision.devices),
                },
                indent=2,
            )
        )
    else:
        print(f"gates for {profile.name}: {decision.status}")
        for reason in decision.reasons:
            print(f"  - {reason}")
        if decision.is_open:
            print(f"  model {decision.model_path}; devices {','.join(map(str, decision.devices)) or 'cpu'}")
    return decision.exit_code
