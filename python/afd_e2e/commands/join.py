"""``afd-e2e join --leader-job J``: may this follower job join its leader? Exit 0 join, 3 nothing to join (the
leader has ended or never waited: the follower passes at once, holding no agent for a leader that is gone).

With ``--follow CASE/PROCESS --profile P`` it then hosts that process of the leader's case
(``multi_agent/follower.py``): launched, watched and torn down by the case runner, its records in ``--out``
(default afd-e2e-out/follower-<leader job>-<case>-<process>: the folder's name is its artifacts' path, unique in
the build) uploaded as artifacts for the leader's merged report.
Exit 0 when its own part passed, 1 when it failed (its process died or stalled, its hygiene failed), 2 bad input.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from functools import partial
from pathlib import Path

from afd_e2e.buildkite import meta_data
from afd_e2e.commands.common import resolve_model
from afd_e2e.errors import EXIT_FAILED, EXIT_NOT_RUN, EXIT_PASSED, UsageError
from afd_e2e.multi_agent.lifecycle import join_decision, leader_state_key


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("join", help="a follower job: does its leader still wait for it (build meta-data)")
    parser.add_argument("--leader-job", required=True, help="the leader's job id (AFD_E2E_LEADER_JOB)")
    parser.add_argument(
        "--follow", metavar="CASE/PROCESS", help="then host this process of the leader's case (the plugin's follow)"
    )
    parser.add_argument("--profile", help="with --follow: the leader's profile (a shipped name or a .yaml path)")
    parser.add_argument("--model", help="with --follow: checkpoint directory, overriding the profile's model env gate")
    parser.add_argument("--devices", help="with --follow: comma-separated GPU ids, overriding the devices env gate")
    parser.add_argument("--port-base", type=int, help="with --follow: the leader's --port-base, if it passed one")
    parser.add_argument(
        "--out",
        type=Path,
        help="with --follow: the follower's records (default afd-e2e-out/follower-<job>-<case>-<process>)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    decision = join_decision(args.leader_job, meta_data.get(leader_state_key(args.leader_job)))
    print(f"afd-e2e join: {decision.reason}")
    if not decision.join:
        return EXIT_NOT_RUN
    if args.follow is None:
        return EXIT_PASSED
    return follow(args)


def follow(args: argparse.Namespace) -> int:
    """Host the process ``--follow`` names for the leader job, through the case runner. Only this part renders (the
    phases' testcases and annotation parts): the plain join, every follower job's first step, reads one meta-data
    key and loads no renderer, numpy or matplotlib."""
    from afd_e2e.commands.run import take_preflight
    from afd_e2e.multi_agent.follower import Follower, records_name
    from afd_e2e.phases import rendering
    from afd_e2e.plan import build_plan
    from afd_e2e.plan.gates import plan_devices
    from afd_e2e.preflight.software import installed_vllm_version
    from afd_e2e.profile import load_profile
    from afd_e2e.results.status import Status
    from afd_e2e.runner.run import execute_run
    from afd_e2e.system.progress import Progress

    rendering.install_renderers()
    case_id, _, process = args.follow.partition("/")
    if not args.profile:
        raise UsageError(f"--follow {args.follow} without --profile", "pass the leader's --profile")
    profile = load_profile(args.profile)
    model = resolve_model(profile, args.model)
    if model is None:
        raise UsageError(
            f"profile {profile.name} needs a model folder: --model was not given and {profile.gates.model_env} is "
            "not set",
            "stage the same checkpoint on every agent of the case and pass --model DIR",
        )
    devices = plan_devices(profile, os.environ, args.devices)
    plan = build_plan(
        profile,
        model_path=model,
        devices=devices,
        case_ids=[case_id],
        port_base=args.port_base,
        vllm_version=installed_vllm_version(profile.engine.executable),  # this agent's vLLM launches the role
    )
    case = plan.case(case_id)
    placed = [p.name for p in case.remote_processes]
    if process not in placed:
        raise UsageError(
            f"--follow {args.follow}: case {case_id} places no process {process!r} on another agent "
            f"(placed: {', '.join(placed) or 'none'})",
            "pass --follow CASE/PROCESS as the leader's follower step names it",
        )
    plan = replace(plan, cases=(replace(case, phases=()),), comparisons=())
    progress = Progress()
    side = Follower(
        args.leader_job,
        process,
        os.environ,
        model_path=model,
        rendezvous_s=profile.budgets.rendezvous_s,
        heartbeat_lost_s=profile.budgets.heartbeat_lost_s,
        progress=progress,
    )
    out = args.out or Path("afd-e2e-out") / records_name(args.leader_job, case_id, process)
    results = execute_run(
        profile, plan, out, progress=progress, preflight=partial(take_preflight, profile, plan, model), side=side
    )
    problem = side.upload(out.resolve(), case_id)
    if problem:
        print(f"afd-e2e join: records not uploaded: {problem}")
    return EXIT_PASSED if results.verdict.status is Status.PASSED else EXIT_FAILED
