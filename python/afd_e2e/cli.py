"""The ``afd-e2e`` console command: one subcommand per module in ``afd_e2e.commands``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from afd_e2e import __version__
from afd_e2e.errors import UsageError

# Each module defines ``register(subparsers)``, which adds its parser with ``func`` set to a handler
# taking the parsed args and returning an exit code.
COMMANDS = (
    "profiles",
    "gates",
    "plan",
    "preflight",
    "run",
    "report",
    "cleanup",
    "schema",
    "pipeline",
    "agent-tags",
    "tiny-model",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="afd-e2e",
        description="Opt-in large-model end-to-end tests of vLLM AFD against a native baseline.",
    )
    parser.add_argument("--version", action="version", version=f"afd-e2e {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"afd_e2e.commands.{name.replace('-', '_')}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except UsageError as exc:
        print(f"afd-e2e {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
