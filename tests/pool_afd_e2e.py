"""``afd-e2e`` in the agent pool's jobs (tests/agent_pool.py), under the plugin's real hooks.

The real ``join`` and ``gates``. ``run`` is a stand-in for the rendezvous a multi-agent case's leader and followers
make through build meta-data (the real one is the runner's), with no engine; ``preflight``, ``cleanup`` and
``report`` answer 0.
- leader (``run`` in a job without AFD_E2E_PROCESS): per case with followers, publish ``waiting``, upload the
  follower steps (pipeline/followers.py through pipeline/upload.py, the real ones), wait within the
  profile's ``budgets.rendezvous_s`` for each to say it is ready, then ``running`` and ``ended:passed``. A follower not
  ready in time: ``ended:failed``, exit 1, naming it.
- follower (``join --follow``, as the follower job's command hook runs it; the real ``join`` without ``--follow``):
  say it is ready, then hold its agent until its leader has ended.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

POLL_S = 0.1  # each look at meta-data starts the stubbed buildkite-agent (bash) once or twice
FOLLOWER_HOLD_S = 60.0  # a follower whose leader never ends gives its agent back after this (a guard, not a verdict)
STAND_INS = ("preflight", "cleanup", "report")


def ready_key(leader_job: str, case: str, process: str) -> str:
    from afd_e2e.plan.addresses import meta_data_key

    return meta_data_key(leader_job, f"{case}/{process}/ready")


def lead(args: argparse.Namespace) -> int:
    from afd_e2e.buildkite import meta_data
    from afd_e2e.multi_agent.lifecycle import RUNNING, WAITING, ended, leader_state_key
    from afd_e2e.pipeline.followers import LeaderJob, follower_pipeline
    from afd_e2e.pipeline.upload import upload_pipeline
    from afd_e2e.plan.build import build_plan
    from afd_e2e.profile import load_profile

    profile = load_profile(args.profile)
    plan = build_plan(profile, model_path=os.environ.get(profile.gates.model_env, "/model"), case_ids=args.case or ())
    leader = LeaderJob.from_env(os.environ, args.profile)
    state = leader_state_key(leader.job_id)
    for case in plan.cases:
        if not case.remote_processes:
            continue
        meta_data.set_value(state, WAITING)
        upload_pipeline(follower_pipeline(profile, case, leader, os.environ))
        print(f"afd-e2e run: {case.id}: uploaded {len(case.remote_processes)} follower(s), waiting", flush=True)
        deadline = time.monotonic() + profile.budgets.rendezvous_s
        for process in case.remote_processes:
            while meta_data.get(ready_key(leader.job_id, case.id, process.name)) is None:
                if time.monotonic() > deadline:
                    meta_data.set_value(state, ended("failed"))
                    print(
                        f"afd-e2e run: {case.id}: follower {process.name} on {process.placement.pool} was not ready "
                        f"within the rendezvous budget ({profile.budgets.rendezvous_s:g} s)",
                        flush=True,
                    )
                    return 1
                time.sleep(POLL_S)
        meta_data.set_value(state, RUNNING)
        print(f"afd-e2e run: {case.id}: every follower is ready, running the workloads", flush=True)
    meta_data.set_value(state, ended("passed"))
    return 0


def follow() -> int:
    from afd_e2e.buildkite import meta_data
    from afd_e2e.multi_agent.lifecycle import ENDED, leader_state_key
    from afd_e2e.pipeline.followers import FollowerRendezvous

    rendezvous = FollowerRendezvous.from_env(os.environ)
    agent = os.environ["BUILDKITE_AGENT_NAME"]
    meta_data.set_value(ready_key(rendezvous.leader_job, rendezvous.case, rendezvous.process), agent)
    print(f"afd-e2e run: {rendezvous.follow} ready on {agent}", flush=True)
    deadline = time.monotonic() + FOLLOWER_HOLD_S
    while time.monotonic() < deadline:
        state = meta_data.get(leader_state_key(rendezvous.leader_job)) or ""
        if state.startswith(ENDED):
            print(f"afd-e2e run: leader {state}, {rendezvous.follow} ends", flush=True)
            return 0
        time.sleep(POLL_S)
    return 1


def main(argv: list[str]) -> int:
    """Each command imports only what it runs, as the real ``afd-e2e`` does (the stand-ins: nothing): the hooks
    call this script four or five times a job, and the renderers' imports alone (matplotlib, ~0.6 s) would be most
    of a job's time."""
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    if command in STAND_INS:
        print(f"afd-e2e {command}: stand-in, nothing to do")
        return 0
    from afd_e2e.phases import builtin

    builtin.install_phases()  # the built-in phases, as the real `afd-e2e` installs them for every command
    parser = argparse.ArgumentParser(prog="afd-e2e")
    commands = parser.add_subparsers(dest="command", required=True)
    if command == "join":
        from afd_e2e.commands import join

        join.register(commands)
    elif command == "gates":
        from afd_e2e.commands import gates

        gates.register(commands)
    run = commands.add_parser("run")
    run.add_argument("--profile", required=True)
    run.add_argument("--case", action="append")
    args, _ = parser.parse_known_args(argv)
    if args.command == "run":
        return lead(args)
    if args.command == "join" and args.follow:  # the follower job's command hook (plugin/lib.sh run_follower)
        return follow()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
