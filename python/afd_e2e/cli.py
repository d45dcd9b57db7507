"""The ``afd-e2e`` console command: one subcommand per module in ``afd_e2e.commands``.

Only the named command's module is imported (all of them for ``--help`` or an unknown name), and the built-in
phases are installed once before it runs: a command that prints YAML loads no runner, renderer or plotting code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from afd_e2e import __version__
from afd_e2e.errors import EXIT_BAD_INPUT, UsageError
from afd_e2e.phases import builtin

# Each module defines ``register(subparsers)``, which adds its parser with ``func`` set to a handler
# taking the parsed args and returning an exit code.
COMMANDS = (
    "profiles",
    "gates",
    "plan",
    "preflight",
    "run",
    "report",
    "trend",
    "bisect",
    "cleanup",
    "schema",
    "pipeline",
    "join",
    "agent-tags",
    "tiny-model",
    "install-agent",
)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of ``afd-e2e``: every subcommand, or, given the command line, only the one it names (if any)."""
    builtin.install_phases()
    parser = argparse.ArgumentParser(
        prog="afd-e2e",
        description="Opt-in large-model end-to-end tests of vLLM AFD against a native baseline.",
    )
    parser.add_argument("--version", action="version", version=f"afd-e2e {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    first = next((arg for arg in argv or () if not arg.startswith("-")), None)  # the command: the first positional
    for name in [first] if first in COMMANDS else COMMANDS:
        importlib.import_module(f"afd_e2e.commands.{name.replace('-', '_')}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit statuses (docs/reference.md): 0 passed, 1 failed (a verdict, a preflight), 2 bad input, 3 not run (gates closed)."""
    given = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(given).parse_args(given)
    try:
        return int(args.func(args))
    except UsageError as exc:
        error = exc
    except OSError as exc:  # a path given on the command line that cannot be used: one line, never a traceback
        where = f"{exc.filename}: " if exc.filename else ""
        error = UsageError(f"{where}{exc.strerror or exc}", "check the path and this user's permissions on it")
    print(f"afd-e2e {args.command}: error: {error}", file=sys.stderr)
    return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
