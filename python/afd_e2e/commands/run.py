"""``afd-e2e run``: run a profile's cases on real vLLM servers into DIR/results.json.

Every input ``plan`` and ``preflight`` check is checked before anything is launched, with the same one-line errors:
gates (model folder, devices), the checkpoint, the port range, the out folder, the forced-routing control's strategy.
Exit statuses (README): 0 the verdict passed, 1 it failed, 2 bad input, 3 not run because the gates are closed.
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

from afd_e2e.commands.common import add_profile_args, check_out_dir, check_port_base
from afd_e2e.errors import EXIT_FAILED, EXIT_GATES_CLOSED, EXIT_PASSED, UsageError
from afd_e2e.gates import BACKEND_ENV, INVALID, evaluate_gates
from afd_e2e.plan import RunPlan, build_plan
from afd_e2e.plan.routing_control import strategy_refusal
from afd_e2e.preflight.checkpoint import check_checkpoint
from afd_e2e.preflight.checks import FAIL
from afd_e2e.preflight.software import control_env, read_installed
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
    parser.add_argument(
        "--allow-busy-gpus",
        action="store_true",
        help="run even where another process holds a planned GPU (recorded in the results and the annotation)",
    )
    parser.set_defaults(func=run)


def gate_environment(profile: Profile) -> dict[str, str]:
    """What the gates see: a CPU profile needs no backend opt-in, so the embedded default runs with no env set."""
    env = dict(os.environ)
    if profile.platform == "cpu":
        env.setdefault(BACKEND_ENV, "cpu")
    return env


def check_checkpoint_inputs(profile: Profile, plan: RunPlan) -> None:
    """Preflight's checkpoint family; its first failure is this run's one-line error (before any model loads)."""
    for check in check_checkpoint(profile.model.checkpoint, plan.model_path, profile.gates.model_env, plan):
        if check.status == FAIL:
            raise UsageError(f"{check.name}: {check.measured}", check.fix)


def without_unrunnable_control(profile: Profile, plan: RunPlan, rebuild: dict) -> tuple[RunPlan, str | None]:
    """The plan without its forced-routing control, and why, when the vLLM to be launched lacks the strategy
    (vLLM would only raise in the FFN engine's first forward, after the model loaded); else the plan as it is."""
    env = control_env(plan)
    if env is None:
        return plan, None
    installed = read_installed(profile.engine.executable, routing_env=env)
    refusal = strategy_refusal(installed.routing_strategies, installed.problem, installed.vllm)
    if refusal is None:
        return plan, None
    return build_plan(profile, **rebuild), f"forced-routing control skipped: {refusal}"


def run(args: argparse.Namespace) -> int:
    from afd_e2e.preflight.runner import record_preflight
    from afd_e2e.results.status import Status
    from afd_e2e.runner.run import execute_run

    profile = load_profile(args.profile)
    if args.devices and not profile.device_count:
        raise UsageError(f"--devices={args.devices} given but profile {profile.name} runs on the CPU", "drop --devices")
    check_port_base(args.port_base)
    decision = evaluate_gates(profile, gate_environment(profile), model_path=args.model, devices=args.devices)
    if decision.status == INVALID:
        raise decision.usage_error(f"profile {profile.name}")
    if not decision.is_open:
        print(f"afd-e2e run: profile {profile.name} not run: its opt-in gates are closed:", file=sys.stderr)
        for reason in decision.reasons:
            print(f"  - {reason}", file=sys.stderr)
        return EXIT_GATES_CLOSED
    assert decision.model_path is not None
    rebuild = {
        "model_path": decision.model_path,
        "devices": decision.devices,
        "case_ids": args.case,
        "port_base": args.port_base,
    }
    plan = build_plan(profile, **rebuild, forced_routing_control=args.forced_routing_control)
    check_checkpoint_inputs(profile, plan)
    check_out_dir(args.out)
    plan, skipped = without_unrunnable_control(profile, plan, rebuild)
    if skipped:
        print(f"afd-e2e run: {skipped}", file=sys.stderr)
    preflight = partial(record_preflight, profile, plan, model_path=decision.model_path)
    results = execute_run(
        profile, plan, args.out, gsm8k_dir=args.gsm8k_dir, preflight=preflight, allow_busy_gpus=args.allow_busy_gpus
    )
    print(f"results: {(args.out / 'results.json').resolve()} ({results.status})")
    if skipped:
        print(f"afd-e2e run: {skipped}", file=sys.stderr)  # again beside the verdict, where readers look
    return EXIT_PASSED if results.verdict.status is Status.PASSED else EXIT_FAILED
