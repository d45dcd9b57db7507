"""``afd-e2e pipeline``: print the steps the large-model GPU tests add to this build, for ``pipeline upload``.

Run it in a bootstrap step: ``afd-e2e pipeline --profile P | buildkite-agent pipeline upload --no-interpolation``. Each decision is
also summarised on stderr, so the bootstrap step's log says why.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from afd_e2e.buildkite.env import BuildEnv
from afd_e2e.errors import UsageError
from afd_e2e.pipeline.agents_api import API_URL, TIMEOUT_S, TOKEN_ENV, agents_lookup
from afd_e2e.pipeline.decide import ProfileDecision, decide
from afd_e2e.pipeline.generate import (
    DEFAULT_PLUGIN,
    GpuStepSettings,
    build_pipeline,
    check_distinct,
)
from afd_e2e.pipeline.profile_sets import PROFILE_SETS, resolve_profile_set
from afd_e2e.pipeline.steps import render
from afd_e2e.profile import builtin_profiles, load_profile


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("pipeline", help="print the Buildkite steps for this build (block, run or why not)")
    parser.add_argument(
        "--profile", action="append", default=[], help="a profile name or .yaml path (repeatable: one group each)"
    )
    parser.add_argument(
        "--profile-set",
        action="append",
        default=[],
        metavar="NAME",
        help="a set of shipped profiles as one group: one block for all its cases, one GPU step per agent pool "
        f"(repeatable; {', '.join(f'{s.name}: {s.description}' for s in PROFILE_SETS.values())})",
    )
    parser.add_argument(
        "--plugin", default=DEFAULT_PLUGIN, help=f"plugin reference with its version ({DEFAULT_PLUGIN})"
    )
    parser.add_argument(
        "--allowed-teams",
        action="append",
        default=[],
        metavar="TEAM",
        help="a team slug that may unblock GPU runs (repeatable); required for pull requests from forks",
    )
    parser.add_argument(
        "--timeout-in-minutes",
        type=int,
        help="the GPU step's time limit (default: derived from the profile's budgets, with a margin)",
    )
    parser.add_argument("--priority", type=int, default=0, help="the GPU step's priority (0)")
    parser.add_argument(
        "--pr-max-gpus",
        type=int,
        metavar="N",
        help="on a pull request, offer only cases using at most N GPUs; the others are listed as left out "
        "(default: no cap; scheduled and manual builds are never capped)",
    )
    parser.add_argument(
        "--agents-token-env",
        default=TOKEN_ENV,
        metavar="NAME",
        help=f"env var holding a Buildkite API token with read_agents ({TOKEN_ENV})",
    )
    parser.add_argument("--agents-api-url", default=API_URL, help=f"Buildkite REST API base URL ({API_URL})")
    parser.add_argument(
        "--agents-api-timeout", type=float, default=TIMEOUT_S, metavar="S", help=f"per request ({TIMEOUT_S:g} s)"
    )
    parser.add_argument(
        "--bisect-from",
        type=Path,
        metavar="DIR",
        help="a nightly's out folder whose trend ran: print the bisect steps for the regression episodes it opened "
        "(with one --profile; docs/bisect.md)",
    )
    parser.add_argument("--format", choices=("yaml", "json"), default="yaml")
    parser.set_defaults(func=run)


def bisect_run(args: argparse.Namespace) -> int:
    """``--bisect-from DIR``: the follow-up step of a nightly uploads a bisect for each episode opened tonight."""
    from afd_e2e.pipeline.bisect_steps import bisect_pipeline, check_nightly_matches, select_bisects
    from afd_e2e.pipeline.steps import step_timeout_minutes
    from afd_e2e.results.store import load_results
    from afd_e2e.trend.files import read_opened_tonight

    if len(args.profile) != 1 or args.profile_set:
        raise UsageError("--bisect-from needs exactly one --profile", "pass the --profile the nightly ran")
    reference = args.profile[0]
    profile = load_profile(reference)
    results = load_results(args.bisect_from)
    agent = (results.build.agent_name if results.build else None) or results.environment.hostname or "this agent"
    selection = select_bisects(read_opened_tonight(args.bisect_from))
    check_nightly_matches(selection, profile, reference, results.profile)
    for line in selection.not_offered:
        print(f"afd-e2e pipeline: no bisect for {line}", file=sys.stderr)
    offered = len(selection.offers)
    print(f"afd-e2e pipeline: {offered} bisect step{'s' if offered != 1 else ''} offered", file=sys.stderr)
    # a bisect makes up to ~6 probes of one case, each with its runs: the case's own budget, several times over
    minutes = args.timeout_in_minutes or 6 * step_timeout_minutes([profile])
    pipeline = bisect_pipeline(selection, profile, reference, agent, timeout_in_minutes=minutes)
    print(render(pipeline, args.format), end="")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.bisect_from is not None:
        return bisect_run(args)
    if args.timeout_in_minutes is not None and args.timeout_in_minutes < 1:
        raise UsageError(f"--timeout-in-minutes={args.timeout_in_minutes} is not positive", "give minutes >= 1")
    if args.pr_max_gpus is not None and args.pr_max_gpus < 0:
        raise UsageError(f"--pr-max-gpus={args.pr_max_gpus} is negative", "give a GPU count >= 0")
    if "#" not in args.plugin:
        raise UsageError(f"--plugin={args.plugin} has no version", f"pin one, e.g. {DEFAULT_PLUGIN}")
    env = BuildEnv.from_environ(os.environ)
    lookup = agents_lookup(
        os.environ, token_env=args.agents_token_env, base_url=args.agents_api_url, timeout_s=args.agents_api_timeout
    )
    if not args.profile and not args.profile_set:
        raise UsageError("no profile given", "pass --profile NAME or --profile-set NAME")
    sets = [(name, resolve_profile_set(name, builtin_profiles())) for name in args.profile_set]
    profiles = [
        (reference, load_profile(reference)) for reference in [*(r for _, refs in sets for r in refs), *args.profile]
    ]
    check_distinct(profiles)
    decisions = {}
    in_sets = {reference for _, references in sets for reference in references}
    for reference, profile in profiles:
        decision = decide(
            env,
            profile,
            lookup,
            allowed_teams=tuple(args.allowed_teams),
            devices_on_agent=reference in in_sets,
            pr_max_gpus=args.pr_max_gpus,
        )
        details = decision.reasons + decision.warnings
        print(f"afd-e2e pipeline: {profile.name}: {decision.headline()}{':' if details else ''}", file=sys.stderr)
        for line in details:
            print(f"  - {line}", file=sys.stderr)
        decisions[reference] = ProfileDecision(reference, profile, decision)
    settings = GpuStepSettings(plugin=args.plugin, timeout_in_minutes=args.timeout_in_minutes, priority=args.priority)
    set_decisions = [(name, [decisions[r] for r in refs]) for name, refs in sets]
    pipeline = build_pipeline([decisions[r] for r in args.profile], settings, set_decisions)
    print(render(pipeline, args.format), end="")
    return 0
