"""``afd-e2e report DIR``: render JUnit XML, the annotation and plots from ``DIR/results.json``; print their paths.

Publishing is opt-in (``--publish``), also inside Buildkite: ``afd-e2e run`` renders at the end and after a crash
or cancel, and the plugin publishes once from its post-command hook, so a job never annotates or uploads twice,
and rendering a results folder copied from another build never overwrites this job's annotation. With
``--publish`` outside Buildkite nothing leaves the machine. The exit code says whether the report was rendered,
not the run's verdict (that is ``afd-e2e run``'s exit code); publishing problems are warnings.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from afd_e2e.buildkite.env import BUILDKITE
from afd_e2e.commands.common import refuse_a_file
from afd_e2e.errors import UsageError
from afd_e2e.phases import rendering

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report", help="render JUnit XML, the Buildkite annotation and plots from DIR/results.json"
    )
    parser.add_argument("dir", type=Path, metavar="DIR", help="a results folder (the --out of `afd-e2e run`)")
    parser.add_argument(
        "--publish",
        action="store_true",
        help=f"inside Buildkite ({BUILDKITE}=true): annotate the build and upload the artifacts",
    )
    parser.add_argument(
        "--test-engine-token-env",
        metavar="NAME",
        help="with --publish: also upload the JUnit files to Buildkite Test Engine with the suite token in $NAME",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rendering.install_renderers()  # this command renders: the phases' testcases and annotation parts
    refuse_a_file(args.dir, "DIR", "pass the results folder that holds results.json (the --out of `afd-e2e run`)")
    name = args.test_engine_token_env
    if name and not args.publish:
        raise UsageError("--test-engine-token-env only applies when publishing", "add --publish")
    if name and not _ENV_NAME.fullmatch(name):
        raise UsageError(
            "--test-engine-token-env is not an environment variable name (its value is not shown)",
            "pass the variable's NAME (e.g. BUILDKITE_ANALYTICS_TOKEN), never the token itself",
        )
    # Imported here so that the other subcommands run on agents without the report's plotting stack.
    from afd_e2e.report import render_all
    from afd_e2e.report.publish import describe_report, publish
    from afd_e2e.trend.auto import trend_if_configured

    for warning in trend_if_configured(args.dir, os.environ):
        print(f"afd-e2e report: warning: {warning}", file=sys.stderr)
    paths = render_all(args.dir)
    print("\n".join(describe_report(paths, os.environ)), flush=True)
    if args.publish:
        for warning in publish(paths, env=os.environ, test_engine_token_env=name):
            print(f"afd-e2e report: warning: {warning}", file=sys.stderr)
    return 0
