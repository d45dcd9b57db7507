"""``afd-e2e profiles``: list the shipped profiles, or validate one."""

from __future__ import annotations

import argparse

from afd_e2e.profile import builtin_profiles, load_profile


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("profiles", help="list shipped profiles, or validate and describe one")
    parser.add_argument("profile", nargs="?", help="a profile name or .yaml path to validate and describe")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    names = [args.profile] if args.profile else builtin_profiles()
    for name in names:
        profile = load_profile(name)
        banner = " [SMOKE]" if profile.smoke_only else ""
        description = profile.description
        if profile.smoke_only:  # the tag says it once: "tiny-cpu [SMOKE]: tiny random-weight MoE ..."
            description = description.removeprefix("SMOKE:").removeprefix("SMOKE").strip()
        print(f"{profile.name}{banner}: {description}")
        if args.profile:
            print(f"  platform {profile.platform}, {profile.device_count} GPUs, gates: {profile.gates.backend}")
            for case in profile.cases:
                variant = f", variant of {case.extends}" if case.extends else ""
                print(f"  case {case.id}: {case.label} ({', '.join(case.phases)}{variant})")
            for cmp in profile.comparisons:
                print(f"  compare {cmp.id}: {cmp.baseline} vs {cmp.candidate} ({', '.join(cmp.measures)})")
    return 0
