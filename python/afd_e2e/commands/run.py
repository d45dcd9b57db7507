"""``afd-e2e run``: run a profile's cases on real vLLM servers into DIR/results.json. Exit 0 only on a pass."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from afd_e2e.commands.common import add_profile_args
from afd_e2e.gates import BACKEND_ENV, evaluate_gates
from afd_e2e.plan import build_plan
from afd_e2e.profile import Profile, load_profile


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("run", help="run a profile's cases on real vLLM servers, writing DIR/results.json")
    add_profile_args(parser)
    parser.add_argument("--out", type=Path, default=Path("afd-e2e-out"), help="results folder (default afd-e2e-out)")
    parser.add_argument(
        "--gsm8k-dir",
        type=Path,
        help="staged GSM8K folder with train.jsonl and test.jsonl (default: the profile's env var)",
    )
    parser.set_defaults(func=run)


def gate_environment(profile: Profile) -> dict[str, str]:
    """What the gates see: a CPU profile needs no backend opt-in, so the embedded default runs with no env set."""
    env = dict(os.environ)
    if profile.platform == "cpu":
        env.setdefault(BACKEND_ENV, "cpu")
    return env


def run(args: argparse.Namespace) -> int:
    from afd_e2e.preflight.runner import record_preflight
    from afd_e2e.results.status import Status
    from afd_e2e.runner.run import execute_run

    profile = load_profile(args.profile)
    decision = evaluate_gates(profile, gate_environment(profile), model_path=args.model, devices=args.devices)
    if not decision.is_open:
        print(f"afd-e2e run: profile {profile.name} may not run here ({decision.status}):", file=sys.stderr)
        for reason in decision.reasons:
            print(f"  - {reason}", file=sys.stderr)
        return decision.exit_code
    assert decision.model_path is not None
    plan = build_plan(
        profile,
        model_path=decision.model_path,
        devices=decision.devices,
        case_ids=args.case,
        port_base=args.port_base,
        forced_routing_control=args.forced_routing_control,
    )
    preflight = record_preflight(profile, plan, model_path=decision.model_path)
    results = execute_run(profile, plan, args.out, gsm8k_dir=args.gsm8k_dir, preflight=preflight)
    print(f"results: {(args.out / 'results.json').resolve()} ({results.status})")
    return 0 if results.verdict.status is Status.PASSED else 1
