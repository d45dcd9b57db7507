"""The search driven end to end: ask the state machine for the next commit, probe it (install once, run the case,
add runs while the verdict is inconclusive, up to ``max_runs``), feed its word back, write ``bisect.json`` and the
``git bisect`` log after every probe, and conclude.

Installing and launching are injected (``install``, ``launch``), so the unit tests drive the whole search with
stand-ins and the command wires the real ones (``install.install_at``, the runner's ``execute_run``). Every probe
first looks in the sample cache: a run already made of the commit (by this search before a cancel, or by a search
on another metric) is judged again, not launched again. A cancel (SIGINT/SIGTERM sets ``flag``) ends the run in
progress through the runner's own teardown, drops that unfinished run, and writes the record as ``cancelled``.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from afd_e2e.bisect.install import Installed, NotInstalled
from afd_e2e.bisect.probe import cached_runs, next_run_folder, probe_environment, runs_dir, sample_of
from afd_e2e.bisect.search import Found, ProbeAt, Range, Stop, next_step
from afd_e2e.bisect.verdicts import Judged, MetricSpec, Sample, judge_commit
from afd_e2e.errors import UsageError
from afd_e2e.profile import Profile
from afd_e2e.results.bisect import (
    BISECT_FILE,
    BISECT_SCHEMA,
    BisectRange,
    BisectRecord,
    CommitRef,
    Probe,
    ProbeRun,
    load_bisect,
    write_bisect,
)
from afd_e2e.results.model import RunResults
from afd_e2e.results.status import BisectWord, Status
from afd_e2e.results.store import now_iso
from afd_e2e.runner.cancellation import CancelFlag

DEFAULT_MAX_RUNS = 3  # runs per commit while its verdict is inconclusive: the probe budget
LOG_FILE = "bisect.log"

Install = Callable[[str], Installed | NotInstalled | None]
Launch = Callable[[str, Mapping[str, str], Path], RunResults]


@dataclass(frozen=True)
class BisectSettings:
    profile: Profile
    case_id: str
    spec: MetricSpec
    repo: Path
    good: str
    bad: str
    out: Path
    cache: Path
    max_runs: int = DEFAULT_MAX_RUNS
    resume: bool = False


@dataclass
class _Search:
    record: BisectRecord
    words: dict[int, BisectWord] = field(default_factory=dict)
    samples: dict[int, list[Sample]] = field(default_factory=dict)


def start_record(settings: BisectSettings, commits: list[CommitRef]) -> BisectRecord:
    """A new record, or with ``resume`` the earlier one's time and launches carried over (its probes are replayed
    from the sample cache); refuses an out folder holding another search."""
    earlier = None
    if (settings.out / BISECT_FILE).is_file():
        if not settings.resume:
            raise UsageError(
                f"{settings.out} already holds a bisect ({BISECT_FILE})",
                "pass --resume to continue it, or another --out",
            )
        earlier = load_bisect(settings.out)
        asked = (settings.profile.name, settings.case_id, settings.spec.key, commits[0].sha, commits[-1].sha)
        held = (earlier.profile, earlier.case, earlier.metric, earlier.commits[0].sha, earlier.commits[-1].sha)
        if asked != held:
            raise UsageError(
                f"{settings.out} holds a bisect of {'/'.join(held[:3])} {held[3][:12]}..{held[4][:12]}, not this one",
                "resume with the same --profile, --case, --metric, --good and --bad, or use another --out",
            )
    return BisectRecord(
        schema=BISECT_SCHEMA,
        profile=settings.profile.name,
        case=settings.case_id,
        metric=settings.spec.key,
        repo=str(settings.repo),
        good=settings.good,
        bad=settings.bad,
        status=Status.RUNNING,
        started_at=earlier.started_at if earlier else now_iso(),
        commits=commits,
        seconds=earlier.seconds if earlier else 0.0,
        launches=earlier.launches if earlier else 0,
        cache=str(settings.cache),
    )


def log_text(record: BisectRecord) -> str:
    """``git bisect log`` form: ``git bisect replay <file>`` in the repository repeats the words said."""
    lines = [
        f"# afd-e2e bisect: profile {record.profile}, case {record.case}, metric {record.metric}",
        "git bisect start --first-parent",
    ]
    for probe in record.probes:
        word = {BisectWord.SKIPPED: "skip"}.get(probe.word, probe.word.value)
        lines += [f"# {word}: [{probe.commit}] {probe.subject} ({probe.reason})", f"git bisect {word} {probe.commit}"]
    if record.first_bad:
        subject = next(c.subject for c in record.commits if c.sha == record.first_bad)
        lines.append(f"# first bad commit: [{record.first_bad}] {subject}")
    elif record.conclusion:
        lines.append(f"# {record.conclusion}")
    return "\n".join(lines) + "\n"


def _save(settings: BisectSettings, record: BisectRecord) -> None:
    write_bisect(settings.out, record)
    (settings.out / LOG_FILE).write_text(log_text(record), encoding="utf-8")


def _probe(
    settings: BisectSettings,
    search: _Search,
    index: int,
    *,
    install: Install,
    launch: Launch,
    flag: CancelFlag,
    environ: Mapping[str, str],
    say: Callable[[str], None],
    clock: Callable[[], float],
) -> Probe | None:
    """Probe one commit to a word (None: cancelled meanwhile)."""
    commit = search.record.commits[index]
    started = clock()
    folder = runs_dir(settings.cache, settings.profile.name, settings.case_id, commit.sha)
    cached = cached_runs(folder) if folder.is_dir() else []
    probe = Probe(commit.sha, commit.subject, index, BisectWord.SKIPPED, "", 0.0)
    samples: list[Sample] = []
    judged = Judged(None, "not run")
    installed: Installed | None = None
    for number in range(1, settings.max_runs + 1):
        if number <= len(cached):
            run = cached[number - 1]
            results, run_folder, seconds, fresh = run.results, run.folder, run.seconds, False
        else:
            if installed is None:
                got = install(commit.sha)
                if got is None:
                    return None
                if isinstance(got, NotInstalled):
                    probe.install_s = got.seconds
                    probe.reason = f"skipped: {got.reason}"
                    break
                installed, probe.install_s = got, got.seconds
                say(f"{commit.sha[:12]}: {got.name} {got.version} installed at that commit in {got.path}")
            run_folder = next_run_folder(folder)
            say(f"{commit.sha[:12]}: run {number} ({commit.subject})")
            run_start = clock()
            results = launch(commit.sha, probe_environment(environ, installed.path), run_folder)
            seconds, fresh = clock() - run_start, True
            search.record.launches += 1
            if flag.is_set() or results.status.unfinished:
                shutil.rmtree(run_folder, ignore_errors=True)
                return None
        sample = sample_of(results, run_folder, settings.case_id, settings.spec)
        samples.append(sample)
        reference = search.samples.get(0, [])
        judged = judge_commit(
            settings.spec, settings.profile, reference, samples, is_reference=index == 0, looks=settings.max_runs
        )
        probe.runs.append(
            ProbeRun(
                number,
                results.status,
                round(seconds, 1),
                _run_values(settings.spec, sample, judged),
                str(run_folder / "results.json"),
                sample.failure,
                cached=not fresh,
            )
        )
        if judged.word is not None:
            break
    else:
        judged = Judged(
            BisectWord.SKIPPED, f"undecided after {settings.max_runs} runs: {judged.reason}", **_figures(judged)
        )
    if judged.word is not None:
        probe.word, probe.reason = judged.word, judged.reason
    probe.verdict, probe.delta_pct, probe.ci95_pct, probe.ci90_pct = (
        judged.verdict,
        judged.delta_pct,
        judged.ci95_pct,
        judged.ci90_pct,
    )
    probe.values = list(judged.values)
    probe.seconds = round(clock() - started, 1)
    search.samples[index] = samples
    return probe


def _run_values(spec: MetricSpec, sample: Sample, judged: Judged) -> list[float]:
    """This run's own values: its bench repetitions, or the correctness figure judged after it."""
    if spec.bench:
        return list(sample.values)
    return judged.values[-1:]


def _figures(judged: Judged) -> dict:
    return {
        "verdict": judged.verdict,
        "delta_pct": judged.delta_pct,
        "ci95_pct": judged.ci95_pct,
        "ci90_pct": judged.ci90_pct,
        "values": judged.values,
    }


def run_bisect(
    settings: BisectSettings,
    commits: list[CommitRef],
    *,
    install: Install,
    launch: Launch,
    flag: CancelFlag,
    environ: Mapping[str, str] | None = None,
    say: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
) -> BisectRecord:
    """The whole search into ``settings.out``; returns the final record (also in ``bisect.json``)."""
    record = start_record(settings, commits)
    settings.out.mkdir(parents=True, exist_ok=True)
    search = _Search(record)
    began, before = clock(), record.seconds
    environ = dict(os.environ if environ is None else environ)
    while True:
        step = next_step(len(commits), search.words)
        if not isinstance(step, ProbeAt):
            break
        probe = _probe(
            settings,
            search,
            step.index,
            install=install,
            launch=launch,
            flag=flag,
            environ=environ,
            say=say,
            clock=clock,
        )
        if probe is None:
            record.status = Status.CANCELLED
            kept = len(record.probes)
            record.conclusion = f"{flag.reason or 'cancelled'}: {kept} probes kept; --resume continues"
            break
        record.probes.append(probe)
        search.words[step.index] = probe.word
        say(f"{probe.commit[:12]} {probe.word}: {probe.reason} ({probe.seconds:.0f} s)")
        record.seconds = round(before + clock() - began, 1)
        _save(settings, record)
    if record.status is not Status.CANCELLED:
        _conclude(record, step)
    record.seconds = round(before + clock() - began, 1)
    record.finished_at = now_iso()
    _save(settings, record)
    return record


def _conclude(record: BisectRecord, step: Found | Range | Stop | ProbeAt) -> None:
    commits = record.commits
    if isinstance(step, Found):
        record.status, record.first_bad = Status.PASSED, commits[step.index].sha
        record.conclusion = f"first bad commit: {commits[step.index].sha} {commits[step.index].subject}"
    elif isinstance(step, Range):
        shas = [c.sha for c in commits[step.first : step.last + 1]]
        record.status, record.range = Status.FAILED, BisectRange(shas[0], shas[-1], shas)
        record.conclusion = (
            f"the first bad commit is one of {len(shas)}: {shas[0][:12]}..{shas[-1][:12]} "
            "(skipped commits between the last good and the first bad one hide which)"
        )
    elif isinstance(step, Stop):
        record.status, record.conclusion = Status.FAILED, step.reason
