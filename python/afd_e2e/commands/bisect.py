"""``afd-e2e bisect``: from a good and a bad revision of a pip-installable package (the AFD plugin, any vLLM general
plugin) to the first bad commit, probing one case of a profile on this agent at each commit (docs/bisect.md).

Every input is checked before anything is installed or launched (the profile, the case and metric, the repository,
both revisions and a package pip can install at each, then the same admission as ``afd-e2e run``: gates,
checkpoint, ``--out``, ports, executables); ``--dry-run`` goes through all of it, writing nothing. Probes run
through the runner's ``execute_run``, one server per run, with the commit's package first on the processes'
``PYTHONPATH``. stdout gets ``first bad commit: <sha> <subject>`` (or the range, or why the endpoints do not
reproduce); progress goes to stderr. Exit statuses: 0 a first bad commit found, 1 a range, endpoints that do not
reproduce or a cancel (``--resume`` continues), 2 bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

from afd_e2e.bisect.commits import check_installable, first_parent_commits
from afd_e2e.bisect.drive import DEFAULT_MAX_RUNS, BisectSettings, run_bisect
from afd_e2e.bisect.install import install_at
from afd_e2e.bisect.search import plan_lines
from afd_e2e.bisect.verdicts import metric_spec
from afd_e2e.errors import EXIT_FAILED, EXIT_PASSED, UsageError
from afd_e2e.profile import load_profile
from afd_e2e.report.bisect_report import write_bisect_report
from afd_e2e.results.bisect_records import write_bisect
from afd_e2e.results.status import Status
from afd_e2e.runner.admission import RunRequest, admit
from afd_e2e.runner.cancellation import CancelFlag, cancel_on_signals


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bisect", help="find the first bad commit of a package between a good and a bad revision (bisect.json)"
    )
    parser.add_argument("--profile", required=True, help="a shipped profile name or a .yaml path")
    parser.add_argument("--case", required=True, metavar="ID", help="the case probed at every commit")
    parser.add_argument(
        "--metric", required=True, help="a bench metric key (mean_tpot_ms, ...) or a correctness outcome: gsm8k, parity"
    )
    parser.add_argument("--repo", type=Path, required=True, help="git checkout of the pip-installable package")
    parser.add_argument("--good", required=True, metavar="REV", help="a revision without the regression")
    parser.add_argument("--bad", required=True, metavar="REV", help="a revision with it")
    parser.add_argument("--out", type=Path, required=True, help="folder for bisect.json, bisect.log, the plot")
    parser.add_argument("--model", help="checkpoint directory, overriding the profile's model env gate")
    parser.add_argument("--gsm8k-dir", type=Path, help="staged GSM8K folder (default: the profile's env var)")
    parser.add_argument("--port-base", type=int, help="first API port (default: the profile's engine.port_base)")
    parser.add_argument(
        "--cache",
        type=Path,
        help="package and sample cache, shared by searches of the same commits (default: OUT/cache)",
    )
    parser.add_argument(
        "--max-runs",
        type=int,
        default=DEFAULT_MAX_RUNS,
        help=f"runs per commit (and per endpoint) while it is undecided (default {DEFAULT_MAX_RUNS})",
    )
    parser.add_argument(
        "--regression-pct",
        type=float,
        metavar="P",
        help="the size of the move to hunt, in %% of the good revision (the nightly trend's episode passes its own): "
        "the bad revision must be worse by at least half of it",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="admit as a real bisect (gates, --out, package), then print the commit list and the probe plan; run nothing",
    )
    parser.add_argument("--resume", action="store_true", help="continue the search in OUT (its runs are reused)")
    parser.set_defaults(func=run)


def _say(message: str) -> None:
    print(f"afd-e2e bisect: {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from afd_e2e.runner.run import execute_run
    from afd_e2e.system.progress import Progress

    if args.max_runs < 1:
        raise UsageError(f"--max-runs {args.max_runs} is below 1", "pass --max-runs 1 or more (default 3)")
    profile = load_profile(args.profile)
    spec = metric_spec(profile, args.case, args.metric, args.regression_pct)
    repo = args.repo.resolve()
    commits = first_parent_commits(repo, args.good, args.bad)
    check_installable(repo, commits)
    request = RunRequest(
        out=args.out, model=args.model, case_ids=(args.case,), port_base=args.port_base, gsm8k_dir=args.gsm8k_dir
    )
    # a dry run is admitted like a real bisect (gates, --out, checkpoint, ports, executables), writing nothing:
    # a plan that prints fine and then cannot start would hide what the real one would refuse
    admission = admit(profile, os.environ, request, dry_run=args.dry_run)
    if admission.closed:
        raise UsageError(
            f"profile {profile.name}'s opt-in gates are closed: {'; '.join(admission.closed)}",
            "open them (the profile's env gates, or --model) to probe its case",
        )
    if not admission.admitted or admission.plan is None:
        raise admission.error()
    plan = admission.plan
    if args.dry_run:
        print(f"{len(commits)} first-parent commits, oldest first:")
        for index, commit in enumerate(commits):
            print(f"  {index:3d} {commit.sha} {commit.subject}")
        print("\n".join(plan_lines([c.sha[:12] for c in commits])))
        return EXIT_PASSED
    settings = BisectSettings(
        profile,
        args.case,
        spec,
        repo,
        args.good,
        args.bad,
        args.out,
        (args.cache or args.out / "cache").resolve(),
        max_runs=args.max_runs,
        resume=args.resume,
    )
    flag = CancelFlag()

    def launch(_sha: str, env: dict[str, str], folder: Path):
        return execute_run(
            profile, plan, folder, gsm8k_dir=args.gsm8k_dir, progress=Progress(stream=sys.stderr), flag=flag, env=env
        )

    install = partial(install_at, repo, cache=settings.cache, cancelled=flag.is_set)
    with cancel_on_signals(flag):
        record = run_bisect(settings, commits, install=lambda sha: install(sha), launch=launch, flag=flag, say=_say)
    section = write_bisect_report(record, args.out)
    write_bisect(args.out, record)  # with the plot's name
    _say(f"{section} and {args.out / 'bisect.json'} written")
    print(record.conclusion)
    return EXIT_PASSED if record.status is Status.PASSED else EXIT_FAILED
