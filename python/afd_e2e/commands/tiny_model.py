"""``afd-e2e tiny-model``: build the embedded default's tiny random-weight model locally."""

from __future__ import annotations

import argparse
from pathlib import Path

from afd_e2e.commands.common import refuse_a_file


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("tiny-model", help="build the tiny random-weight MoE model tiny-cpu serves")
    parser.add_argument("--out", type=Path, default=Path(".tiny-model"), help="output folder (default .tiny-model)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from afd_e2e.tiny_model import build_tiny_model

    refuse_a_file(args.out, "--out", "pass --out a new or existing folder for the model, e.g. .tiny-model")
    print(f"tiny model ready in {build_tiny_model(args.out).resolve()}")
    return 0
