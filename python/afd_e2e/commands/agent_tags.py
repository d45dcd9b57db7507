"""``afd-e2e agent-tags``: Buildkite agent tags derived from this machine's GPUs, as ``buildkite-agent start --tags``
takes them. Exit 1 (and nothing on stdout) when there is no GPU to describe."""

from __future__ import annotations

import argparse
import json
import sys

from afd_e2e.buildkite.agent_tags import format_tags, hardware_tags
from afd_e2e.commands.preflight import add_readings_arg
from afd_e2e.gpu.inventory import build_inventory
from afd_e2e.gpu.machine_probe import read_machine
from afd_e2e.gpu.nvml import NvmlUnavailable
from afd_e2e.gpu.recorded import recorded_machine


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "agent-tags", help="print Buildkite agent tags derived from the GPUs (key=value,...)"
    )
    add_readings_arg(parser)
    parser.add_argument("--json", action="store_true", help="print the tags as a JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    read = read_machine if args.readings is None else recorded_machine(args.readings)
    try:
        tags = hardware_tags(build_inventory(read()))
    except NvmlUnavailable as exc:
        print(f"afd-e2e agent-tags: no GPU to describe: {exc}", file=sys.stderr)
        return 1
    if not tags:
        print("afd-e2e agent-tags: NVML lists no GPU", file=sys.stderr)
        return 1
    print(json.dumps(tags, indent=2) if args.json else format_tags(tags))
    return 0
