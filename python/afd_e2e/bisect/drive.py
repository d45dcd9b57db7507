"""The search driven end to end: ask the state machine for the next commit, probe it (install once, run the case,
add runs while it is undecided, up to ``max_runs``), feed its word back, write ``bisect.json`` and the
``git bisect`` log after every probe, and conclude.

An undecided commit whose judgement names an endpoint (its spread weighs as much as the commit's own,
``bisect/verdicts.py``) gets a run of that endpoint before its own next run: the endpoints are shared by every
commit, so their added runs serve the rest of the search too; each endpoint has ``max_runs`` runs at most, and each
added run is recorded on the endpoint's probe with the commit and the reason it was added for.

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
from afd_e2e.bisect.verdicts import Ends, Judged, MetricSpec, Role, Sample, judge_commit
from afd_e2e.errors import UsageError
from afd_e2e.profile import Profile
from afd_e2e.results.bisect_records import (
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
    installed: dict[int, Installed] = field(default_factory=dict)

    def ends(self) -> Ends:
        return Ends(self.samples.get(0, []), self.samples.get(len(self.record.commits) - 1, []))

    def role(self, index: int) -> Role:
        return "good" if index == 0 else "bad" if index == len(self.record.commits) - 1 else "between"


@dataclass(frozen=True)
class _Edges:
    """What a probe does outside the search's own state: install, launch, the cancel flag, the environment, the
    progress line and the clock."""

    install: Install
    launch: Launch
    flag: CancelFlag
    environ: Mapping[str, str]
    say: Callable[[str], None]
    clock: Callable[[], float]


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
        hunted_pct=settings.spec.hunted_pct,
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


def _run_once(
    settings: BisectSettings, search: _Search, index: int, edges: _Edges, why: str, *, added: str = ""
) -> ProbeRun | NotInstalled | None:
    """The commit's next run (the ``len(samples) + 1``-th): from the sample cache when it holds one, else installed
    (once per commit) and launched; None when cancelled meanwhile, NotInstalled when the commit does not install.
    ``why``: the progress line's; ``added``: recorded on an endpoint's run added for another commit."""
    commit = search.record.commits[index]
    number = len(search.samples.get(index, [])) + 1
    folder = runs_dir(settings.cache, settings.profile.name, settings.case_id, commit.sha)
    cached = cached_runs(folder) if folder.is_dir() else []
    if number <= len(cached):
        run = cached[number - 1]
        results, run_folder, seconds, fresh = run.results, run.folder, run.seconds, False
    else:
        if index not in search.installed:
            got = edges.install(commit.sha)
            if got is None or isinstance(got, NotInstalled):
                return got
            search.installed[index] = got
            edges.say(f"{commit.sha[:12]}: {got.name} {got.version} installed at that commit in {got.path}")
        run_folder = next_run_folder(folder)
        edges.say(f"{commit.sha[:12]}: run {number} ({why})")
        run_start = edges.clock()
        environment = probe_environment(edges.environ, search.installed[index].path)
        results = edges.launch(commit.sha, environment, run_folder)
        seconds, fresh = edges.clock() - run_start, True
        search.record.launches += 1
        if edges.flag.is_set() or results.status.unfinished:
            shutil.rmtree(run_folder, ignore_errors=True)
            return None
    sample = sample_of(results, run_folder, settings.case_id, settings.spec)
    search.samples.setdefault(index, []).append(sample)
    run = ProbeRun(
        number,
        results.status,
        round(seconds, 1),
        list(sample.values) if settings.spec.bench else [],
        str(run_folder / "results.json"),
        sample.failure,
        cached=not fresh,
        added=added,
    )
    return run


def _add_end_runs(settings: BisectSettings, search: _Search, index: int, judged: Judged, edges: _Edges) -> bool:
    """Runs of the endpoints an undecided judgement of commit ``index`` names (``judged.add_ends``), one each, while
    the endpoint has runs left (``max_runs``): its spread weighs as much as the commit's own, and it is shared by
    every commit. Appended to the endpoint's own probe; False when cancelled meanwhile."""
    commit = search.record.commits[index]
    for end in judged.add_ends:
        end_index = 0 if end == "good" else len(search.record.commits) - 1
        probe = next((p for p in search.record.probes if p.index == end_index), None)
        if end_index == index or probe is None or len(search.samples.get(end_index, [])) >= settings.max_runs:
            continue
        why = f"for {commit.sha[:12]}: the {end} revision's spread weighs as much as the commit's ({judged.reason})"
        started = edges.clock()
        got = _run_once(settings, search, end_index, edges, why, added=why)
        if got is None:
            return False
        if isinstance(got, NotInstalled):  # it installed before; a vanished package folder is the same skip
            continue
        probe.runs.append(got)
        probe.values = [v for sample in search.samples[end_index] for v in sample.values]
        if end_index == 0:
            probe.reason = f"the good revision: {len(probe.values)} repetitions are the reference"
        probe.seconds = round(probe.seconds + edges.clock() - started, 1)
    return True


def _probe(settings: BisectSettings, search: _Search, index: int, edges: _Edges) -> Probe | None:
    """Probe one commit to a word (None: cancelled meanwhile)."""
    commit = search.record.commits[index]
    started = edges.clock()
    probe = Probe(commit.sha, commit.subject, index, BisectWord.SKIPPED, "", 0.0)
    search.samples[index] = []
    judged = Judged(None, "not run")
    for number in range(1, settings.max_runs + 1):
        why = commit.subject if number == 1 else f"undecided: {judged.reason}"
        got = _run_once(settings, search, index, edges, why)
        if got is None:
            return None
        if isinstance(got, NotInstalled):
            probe.install_s = got.seconds
            probe.reason = f"skipped: {got.reason}"
            break
        if index in search.installed:
            probe.install_s = search.installed[index].seconds
        run = got
        judged = judge_commit(
            settings.spec,
            settings.profile,
            search.ends(),
            search.samples[index],
            role=search.role(index),
            looks=settings.max_runs,
        )
        if not settings.spec.bench:
            run.values = judged.values[-1:]
        probe.runs.append(run)
        if judged.word is not None:
            break
        if number < settings.max_runs and not _add_end_runs(settings, search, index, judged, edges):
            return None
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
    probe.position, probe.position_ci90 = judged.position, judged.position_ci90
    probe.values = list(judged.values)
    probe.seconds = round(edges.clock() - started, 1)
    return probe


def _figures(judged: Judged) -> dict:
    return {
        "verdict": judged.verdict,
        "delta_pct": judged.delta_pct,
        "ci95_pct": judged.ci95_pct,
        "ci90_pct": judged.ci90_pct,
        "values": judged.values,
        "position": judged.position,
        "position_ci90": judged.position_ci90,
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
    edges = _Edges(install, launch, flag, dict(os.environ if environ is None else environ), say, clock)
    while True:
        step = next_step(len(commits), search.words)
        if not isinstance(step, ProbeAt):
            break
        probe = _probe(settings, search, step.index, edges)
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
        ends = {0: BisectWord.GOOD, len(commits) - 1: BisectWord.BAD}  # what each endpoint should have been
        why = next((p.reason for p in record.probes if p.index in ends and p.word is not ends[p.index]), "")
        record.status, record.conclusion = Status.FAILED, step.reason + (f" ({why})" if why else "")
