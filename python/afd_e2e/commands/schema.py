"""``afd-e2e schema results|bisect``: print the JSON Schema of results.json or bisect.json (the ones shipped as
``results/schema.json`` and ``results/bisect_schema.json``)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "schema", help="print the JSON Schema of a file afd-e2e writes (results.json, bisect.json)"
    )
    parser.add_argument(
        "document",
        choices=["results", "bisect"],
        help="which file: results (DIR/results.json), bisect (DIR/bisect.json)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from afd_e2e.results.bisect_records import bisect_schema_text
    from afd_e2e.results.schema import schema_text

    print(bisect_schema_text() if args.document == "bisect" else schema_text(), end="")
    return 0
