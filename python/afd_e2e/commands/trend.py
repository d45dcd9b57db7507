"""``afd-e2e trend DIR [--history HIST | --buildkite]``: DIR's run against its own history, per case and metric.

Writes ``DIR/trend/`` (section, plots, JUnit, trend.json) and renders the report again so the annotation carries
the section. Exit 0, or 1 when something regressed and the profile says ``on_regression: fail``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from afd_e2e.buildkite.env import API_TOKEN
from afd_e2e.errors import UsageError
from afd_e2e.phases import rendering

if TYPE_CHECKING:
    from afd_e2e.trend.compute import TrendReport

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("trend", help="compare a run with its history (earlier runs or builds)")
    parser.add_argument("dir", type=Path, metavar="DIR", help="a results folder (the --out of `afd-e2e run`)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--history", type=Path, metavar="HIST", help="a folder with one sub-folder per earlier run")
    source.add_argument(
        "--buildkite", action="store_true", help="earlier builds of this pipeline and branch (inside Buildkite)"
    )
    parser.add_argument("--window", type=int, metavar="N", help="earlier runs compared (default: the profile's, 14)")
    parser.add_argument("--profile", metavar="P", help="read the trend settings from this profile (default: the run's)")
    parser.add_argument(
        "--token-env",
        metavar="NAME",
        help=f"variable holding the Buildkite API token (default $AFD_E2E_TREND_TOKEN_ENV or {API_TOKEN})",
    )
    parser.add_argument("--api-url", default=None, help=argparse.SUPPRESS)  # tests and benchmarks: a local server
    parser.add_argument("--cache-dir", type=Path, metavar="DIR", help="where fetched results are kept by build id")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rendering.install_renderers()  # this command renders: the phases' testcases and annotation parts
    from afd_e2e.report import render_all
    from afd_e2e.trend.trend_run import SOURCE_ENV, TrendOptions, options_from_env, run_trend

    if args.token_env and not _ENV_NAME.fullmatch(args.token_env):
        raise UsageError(
            "--token-env is not an environment variable name (its value is not shown)",
            f"pass the variable's NAME (e.g. {API_TOKEN}), never the token itself",
        )
    configured = options_from_env(os.environ)
    if args.history is None and not args.buildkite and configured is None:
        raise UsageError("no history to compare with", f"pass --history DIR or --buildkite, or set {SOURCE_ENV}")
    source = str(args.history) if args.history else "buildkite" if args.buildkite else configured.source
    options = TrendOptions(
        source=source, window=args.window, profile=args.profile, token_env=args.token_env, cache_dir=args.cache_dir
    )
    if args.api_url:
        options = dataclasses.replace(options, api_url=args.api_url)
    report, files = run_trend(args.dir, options)
    for line in summary_lines(report):
        print(line)
    print(f"trend section: {files.section}")
    print(f"trend junit: {files.junit}")
    for plot in files.plots:
        print(f"trend plot: {plot}")
    render_all(args.dir)
    return 1 if report.fails else 0


def summary_lines(report: TrendReport) -> list[str]:
    from afd_e2e.trend.section import value_text

    runs, count = len(report.history), len(report.regressions)
    verdict = (
        f"nothing judged: {report.nothing_judged}"
        if report.nothing_judged
        else f"{count} regression{'s' if count != 1 else ''}"
    )
    lines = [
        f"trend: tonight against {runs} earlier run{'s' if runs != 1 else ''} ({report.source}); "
        f"{len(report.skipped)} skipped; {verdict}"
    ]
    for row in report.calls:
        if row.started is not None:
            change = f"{row.change_pct:+.1f}%" if row.change_pct is not None else "?"
            lines.append(
                f"  {row.status}: {row.case_id} {row.metric.key} tonight {value_text(row.tonight, row.metric.unit)} "
                f"(mean of its repetitions), {change} against the median before the change, since {row.started.label}"
            )
    for skip in report.skipped:
        lines.append(f"  skipped {skip.build.label}: {skip.reason}")
    return lines
