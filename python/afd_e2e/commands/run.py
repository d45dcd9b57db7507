"""``afd-e2e run``: run a profile's cases on real vLLM servers into DIR/results.json.

Every input is checked before anything is launched, in one admission step (``afd_e2e.runner.admission``), with the
same one-line errors as ``plan`` and ``preflight``: gates (model folder, devices), the checkpoint, the port range, the
out folder, the forced-routing control's strategy, the phases' inputs, free ports, executables and idle GPUs.
Exit statuses (README): 0 the verdict passed, 1 it failed, 2 bad input, 3 not run because the gates are closed.
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

from afd_e2e.commands.common import add_profile_args
from afd_e2e.errors import EXIT_FAILED, EXIT_GATES_CLOSED, EXIT_PASSED
from afd_e2e.plan import RunPlan
from afd_e2e.profile import Profile, load_profile
from afd_e2e.results.model import PreflightRecord
from afd_e2e.runner.admission import RunRequest, admit


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("run", help="run a profile's cases on real vLLM servers, writing DIR/results.json")
    add_profile_args(parser)
    parser.add_argument("--out", type=Path, default=Path("afd-e2e-out"), help="results folder (default afd-e2e-out)")
    parser.add_argument(
        "--gsm8k-dir",
        type=Path,
        help="staged GSM8K folder with train.jsonl and test.jsonl (default: the profile's env var)",
    )
    parser.add_argument(
        "--allow-busy-gpus",
        action="store_true",
        help="run even where another process holds a planned GPU (recorded in the results and the annotation)",
    )
    parser.set_defaults(func=run)


def take_preflight(profile: Profile, plan: RunPlan, model_path: str) -> PreflightRecord:
    from afd_e2e.preflight.runner import record_preflight

    return record_preflight(profile, plan, model_path=model_path)


def run(args: argparse.Namespace) -> int:
    from afd_e2e.results.status import Status
    from afd_e2e.runner.run import execute_run

    profile = load_profile(args.profile)
    request = RunRequest(
        out=args.out,
        model=args.model,
        devices=args.devices,
        case_ids=tuple(args.case),
        port_base=args.port_base,
        forced_routing_control=args.forced_routing_control,
        gsm8k_dir=args.gsm8k_dir,
        allow_busy_gpus=args.allow_busy_gpus,
    )
    admission = admit(profile, os.environ, request, preflight=partial(take_preflight, profile))
    if admission.closed:
        print(f"afd-e2e run: profile {profile.name} not run: its opt-in gates are closed:", file=sys.stderr)
        for reason in admission.closed:
            print(f"  - {reason}", file=sys.stderr)
        return EXIT_GATES_CLOSED
    if not admission.admitted:
        raise admission.error()
    assert admission.plan is not None
    for note in admission.notes:
        print(f"afd-e2e run: {note}", file=sys.stderr)
    results = execute_run(profile, admission, args.out, gsm8k_dir=args.gsm8k_dir)
    print(f"results: {(args.out / 'results.json').resolve()} ({results.status})")
    for note in admission.notes:
        print(f"afd-e2e run: {note}", file=sys.stderr)  # again beside the verdict, where readers look
    return EXIT_PASSED if results.verdict.status is Status.PASSED else EXIT_FAILED
