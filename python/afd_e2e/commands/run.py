"""``afd-e2e run``: run a profile's cases on real vLLM servers into DIR/results.json.

Every input is checked before anything is launched, in one admission step (``afd_e2e.runner.admission``), with the
same one-line errors as ``plan`` and ``preflight``: gates (model folder, devices), the checkpoint, the port range, the
out folder, the forced-routing control's strategy, the phases' inputs, free ports, executables and idle GPUs.
Exit statuses (docs/reference.md): 0 the verdict passed, 1 it failed, 2 bad input, 3 not run because the gates are closed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from afd_e2e.buildkite.env import BUILDKITE, job_id
from afd_e2e.commands.common import add_profile_args
from afd_e2e.errors import EXIT_FAILED, EXIT_GATES_CLOSED, EXIT_PASSED, UsageError
from afd_e2e.phases import rendering
from afd_e2e.plan import RunPlan
from afd_e2e.profile import Profile, load_profile
from afd_e2e.results.model import PreflightRecord
from afd_e2e.runner.admission import RunRequest, admit

if TYPE_CHECKING:
    from afd_e2e.multi_agent.leader import Leader


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
    parser.add_argument(
        "--keep-on-stall",
        action="store_true",
        help="debugging: leave a stalled case's processes up (pids and attach commands printed), end the run there; "
        "refused in CI",
    )
    parser.set_defaults(func=run)


CI_MARKERS = ("CI", BUILDKITE)


def refuse_keep_in_ci(keep_on_stall: bool, env: os._Environ[str] | dict[str, str]) -> None:
    """``--keep-on-stall`` leaves processes holding the agent's GPUs: never on a CI agent."""
    found = [name for name in CI_MARKERS if env.get(name, "").lower() not in ("", "0", "false")]
    if keep_on_stall and found:
        raise UsageError(
            f"--keep-on-stall is for debugging by hand: {found[0]} is set, this looks like CI",
            "drop --keep-on-stall (CI always tears a stalled case down)",
        )


def take_preflight(profile: Profile, plan: RunPlan, model_path: str) -> PreflightRecord:
    from afd_e2e.preflight.run_checks import record_preflight

    return record_preflight(profile, plan, model_path=model_path)


def leader_side(profile: Profile, plan: RunPlan, progress: Callable[[str], None], profile_ref: str) -> Leader | None:
    """The leader's part when a case of the plan places roles on other agents (admission saw the job id)."""
    from afd_e2e.multi_agent.leader import Leader

    if not any(case.remote_processes for case in plan.cases):
        return None
    leader_job = job_id(os.environ)
    assert leader_job is not None, "admission refuses a case placed on other agents outside a Buildkite job"
    return Leader(
        leader_job,
        os.environ,
        interface=profile.engine.interface,
        model_path=plan.model_path,
        profile=profile,
        profile_ref=profile_ref,
        rendezvous_s=profile.budgets.rendezvous_s,
        heartbeat_lost_s=profile.budgets.heartbeat_lost_s,
        teardown_s=profile.budgets.teardown_s,
        progress=progress,
    )


def run(args: argparse.Namespace) -> int:
    rendering.install_renderers()  # this command renders: the phases' testcases and annotation parts
    from afd_e2e.results.status import Status
    from afd_e2e.runner.run import execute_run
    from afd_e2e.system.progress import Progress

    refuse_keep_in_ci(args.keep_on_stall, os.environ)
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
    progress = Progress()
    results = execute_run(
        profile,
        admission,
        args.out,
        gsm8k_dir=args.gsm8k_dir,
        progress=progress,
        keep_on_stall=args.keep_on_stall,
        side=leader_side(profile, admission.plan, progress, args.profile),
    )
    print(f"results: {(args.out / 'results.json').resolve()} ({results.status})")
    for note in admission.notes:
        print(f"afd-e2e run: {note}", file=sys.stderr)  # again beside the verdict, where readers look
    return EXIT_PASSED if results.verdict.status is Status.PASSED else EXIT_FAILED
