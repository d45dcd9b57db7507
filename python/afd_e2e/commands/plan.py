"""``afd-e2e plan``: the processes each case launches, as paste-able shell or as JSON. A plan whose case could
only end ``unproven`` under ``execution.require_proof`` (CUDA graphs with no profiler phase that can show them:
``execution/provable.py``) is refused, exit 2, before anyone starts it.

The text form names the executable the runner would launch by its full path (resolved like the runner does), so a
pasted command runs without this environment on PATH; where it is not found here, a comment says so and how. The
argv is for the installed vLLM's version (or ``--vllm-version``'s), which the text's header names: flags that exist
only from some vLLM version follow it (``plan/vllm_versions.py``).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from afd_e2e.commands.common import add_profile_args, plan_from_args
from afd_e2e.errors import UsageError
from afd_e2e.execution.provable import unprovable
from afd_e2e.plan import RunPlan
from afd_e2e.plan.shell_text import render_text
from afd_e2e.plan.vllm_versions import release
from afd_e2e.system.executables import resolve_executable


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("plan", help="show each case's processes, argv, env and ports in launch order")
    add_profile_args(parser)
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.add_argument(
        "--vllm-version",
        metavar="V",
        help="plan the argv for vLLM V (e.g. 0.26.0, the GPU kit's) instead of the installed vLLM's version",
    )
    parser.set_defaults(func=run)


def with_resolved_executables(plan: RunPlan) -> tuple[RunPlan, list[str]]:
    """The plan with each argv[0] as the runner resolves it, and a note for each name not found here."""
    resolved: dict[str, str] = {}
    notes = []
    for name in sorted({p.argv[0] for case in plan.cases for p in case.processes}):
        try:
            resolved[name] = resolve_executable(name)
        except UsageError as exc:
            notes.append(f"# {exc.problem}: {exc.fix}; the commands below need {name} on PATH")

    def resolve(process):
        return replace(process, argv=(resolved.get(process.argv[0], process.argv[0]), *process.argv[1:]))

    cases = tuple(replace(case, processes=tuple(map(resolve, case.processes))) for case in plan.cases)
    return replace(plan, cases=cases), notes


def run(args: argparse.Namespace) -> int:
    if args.vllm_version is not None:
        release(args.vllm_version)  # a UsageError for a version with no release numbers
    profile, plan = plan_from_args(args, args.vllm_version)
    if problems := unprovable(profile, plan):
        more = f" ({len(problems) - 1} more case(s) alike: afd-e2e preflight lists them)" if len(problems) > 1 else ""
        raise UsageError(problems[0].problem + more, problems[0].fix)
    if args.json:
        print(json.dumps(plan.to_dict(), indent=2))
        return 0
    pasteable, notes = with_resolved_executables(plan)
    print("".join(f"{note}\n" for note in notes) + render_text(pasteable), end="")
    return 0
