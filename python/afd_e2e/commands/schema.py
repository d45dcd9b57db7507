"""``afd-e2e schema results``: print the JSON Schema of results.json (the one shipped as ``results/schema.json``)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("schema", help="print the JSON Schema of a file afd-e2e writes (results.json)")
    parser.add_argument("document", choices=["results"], help="which file: results (DIR/results.json)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from afd_e2e.results.schema import schema_text

    print(schema_text(), end="")
    return 0
