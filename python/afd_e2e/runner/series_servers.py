"""Where a ranged series gets its sides' servers, as the plan chose (``plan/series.py``, ``workloads.sequential``).

``repetitions``: the runner keeps a comparison's baseline case up while the cases after it run, so its candidate
can alternate repetitions with it. Cases still run one after another and each is launched, checked and torn down
by ``run_case``; the only change is when a baseline's teardown happens: a baseline of a held series is torn down
after its last such candidate (the cases in between run nested inside its ``while_up``; holds nest).

``blocks``: once the later case of the pair has run (and is torn down), the two sides are launched afresh in turn,
each for a block of repetitions (``run_block``: the case's own lifecycle, with its teardown and hygiene checks),
until the series is decided. Every block is recorded with its launch and checks, and each side's block effect
(``workloads.blocks``).

What the plan refused keeps ``min`` repetitions a side, and its record says why.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from afd_e2e.plan.model import BLOCKS, NOT_RUN, REPETITIONS, CasePlan, SeriesPlan
from afd_e2e.profile import catalogue
from afd_e2e.profile.bench_spec import bench_spec
from afd_e2e.results.model import CaseResults
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.results.performance_records import BlockRecord, CasePerformance, Repetition, SequentialRecord
from afd_e2e.results.status import Status
from afd_e2e.runner.cancellation import call_watched
from afd_e2e.runner.case import CaseFailure, RunContext, died, new_case_results, run_block, run_case
from afd_e2e.runner.server import CaseServers, Stalled
from afd_e2e.runner.watch import EngineDied
from afd_e2e.system.child_env import client_environment
from afd_e2e.system.executables import resolve_executable
from afd_e2e.system.markers import marker_env
from afd_e2e.workloads import bench, blocks, sequential
from afd_e2e.workloads.completions import CompletionError, served_model_root


@dataclass(frozen=True)
class Held:
    """A baseline case kept up after its phases for the series of the cases after it."""

    case: CasePlan
    results: CaseResults
    servers: CaseServers


class BaselineLost(Exception):
    """The held baseline died or stalled during the series: the series fails, the candidate case does not."""


def held_until(cases: Sequence[CasePlan], index: int, series: Mapping[str, str]) -> int:
    """The index of the last case after ``cases[index]`` whose series compares with it (``index``: none)."""
    last = index
    for later in range(index + 1, len(cases)):
        if series.get(cases[later].id) == cases[index].id:
            last = later
    return last


@dataclass
class _Writes:
    """The series' copy of one case's performance section, copied into its results on every flush while open
    (the series runs in a worker thread; once closed, an abandoned thread writes nowhere)."""

    results: CaseResults
    lock: threading.RLock | threading.Lock
    open: bool = True

    def __post_init__(self) -> None:
        self.section = copy.deepcopy(self.results.section(PERFORMANCE))

    def flush(self) -> None:
        with self.lock:
            if self.open and self.section is not None:
                self.results.set_section(PERFORMANCE, copy.deepcopy(self.section))


def run_cases(ctx: RunContext, cases: Sequence[CasePlan]) -> None:
    """Every case in order, each baseline of a held series up until its last candidate has run, each blocks series
    run once the later of its cases has; what the plan refused is recorded on its candidate's performance section."""
    held = {s.candidate: s.baseline for s in ctx.plan.series if s.alternation == REPETITIONS}
    _run_cases(ctx, list(cases), held, {}, _State())
    for series in ctx.plan.series:
        found = ctx.store.results.cases.get(series.candidate)
        section: CasePerformance | None = found.section(PERFORMANCE) if found is not None else None
        if series.alternation == NOT_RUN and section is not None:
            record = SequentialRecord(series.baseline, series.candidate, series.min, series.max)
            record.stopped, record.reason = "not run", f"{series.reason}: {series.min} repetitions a side"
            section.sequential = record
    ctx.store.flush()


@dataclass
class _State:
    kept: str | None = None  # a case whose stalled processes were kept up (--keep-on-stall): the rest is skipped


def kept_up(case: CaseResults) -> bool:
    telemetry = case.section("telemetry")
    return telemetry is not None and any(stall.kept for stall in telemetry.stalls)


def _run_cases(
    ctx: RunContext, cases: list[CasePlan], series: Mapping[str, str], held: Mapping[str, Held], state: _State
) -> None:
    index = 0
    while index < len(cases):
        case = cases[index]
        last = held_until(cases, index, series)
        inner = cases[index + 1 : last + 1]
        index = last + 1
        if ctx.flag.is_set():
            ctx.store.results.cases[case.id] = new_case_results(case, Status.CANCELLED, "run cancelled before it began")
            _run_cases(ctx, inner, series, held, state)
            continue
        if state.kept is not None:
            why = f"not run: case {state.kept}'s stalled processes were kept up (--keep-on-stall)"
            ctx.store.results.cases[case.id] = new_case_results(case, Status.SKIPPED, why)
            _run_cases(ctx, inner, series, held, state)
            continue
        ran_inner = False

        def while_up(servers: CaseServers, results: CaseResults, case: CasePlan = case, inner=inner) -> None:
            nonlocal ran_inner
            baseline = held.get(series.get(case.id, ""))
            if baseline is not None:
                run_held_series(ctx, baseline, case, results, servers)
            if inner:
                ran_inner = True
                _run_cases(ctx, inner, series, {**held, case.id: Held(case, results, servers)}, state)

        results = run_case(ctx, case, while_up=while_up)
        if kept_up(results):
            state.kept = case.id
        if inner and not ran_inner:  # the case failed before it could be held: the rest runs without it
            _run_cases(ctx, inner, series, held, state)
        for planned in ctx.plan.series:
            later = max(planned.baseline, planned.candidate, key=[c.id for c in ctx.plan.cases].index)
            if planned.alternation == BLOCKS and later == case.id and state.kept is None:  # a cancel is recorded
                run_blocks(ctx, planned)


def _target(ctx: RunContext, side: CasePlan) -> bench.Target:
    """Where a side's repetitions go, once its server is ready (its model card names the tokenizer it loaded)."""
    root = served_model_root(side.base_url, side.served_model_name, timeout_s=ctx.profile.budgets.request_s)
    env = bench.client_env(
        client_environment(ctx.base_env, markers=marker_env(ctx.run_id, side.id, bench.PROCESS_NAME))
    )
    return bench.Target(side.id, side.base_url, side.served_model_name, root, env)


def _repetition(
    ctx: RunContext,
    target: bench.Target,
    client: bench.WarmClient | None,
    stop: threading.Event,
    index: int,
    kind: str = "rep",
) -> Repetition:
    spec = bench_spec(ctx.profile)
    assert spec is not None
    rep, _ended = bench.run_one(
        spec,
        target,
        executable=resolve_executable(ctx.profile.engine.executable),
        out_dir=ctx.layout.out_dir,
        kind=kind,
        index=index,
        total=spec.most_repetitions if kind == "rep" else spec.warmups,
        progress=lambda line: ctx.progress(f"{target.case_id}: {line}"),
        cancelled=stop,
        heartbeat_s=bench.PROGRESS_EVERY_S,
        client=client,
    )
    return rep


def _repetitions(
    ctx: RunContext,
    target: bench.Target,
    client: bench.WarmClient | None,
    stop: threading.Event,
    indices: list[int],
    into: list[Repetition],
) -> None:
    """The formal repetitions ``indices`` into ``into`` as each ends (a block abandoned midway keeps those run), up
    to the first that did not pass: the series ends there."""
    for index in indices:
        into.append(_repetition(ctx, target, client, stop, index))
        if into[-1].status is not Status.PASSED:
            return


class _Budget:
    """The performance budget a series runs under: the candidate's performance phase already spent part of it,
    and another pair of steps (the slowest seen so far, each) must fit in the rest."""

    def __init__(self, ctx: RunContext, results: CaseResults, stop: threading.Event) -> None:
        self.budget_s = catalogue.phase("performance").budget.seconds(ctx.profile)
        self.spent_s = results.timings.phases.get("performance", 0.0)
        self.clock = ctx.clock
        self.started = ctx.clock()
        self.slowest_s = 0.0
        self._stop = stop

    def timed(self, step: sequential.Step) -> sequential.Step:
        def timed_step(case_id: str, indices: list[int]):
            began = self.clock()
            try:
                return step(case_id, indices)
            finally:
                self.slowest_s = max(self.slowest_s, self.clock() - began)

        return timed_step

    def over(self) -> tuple[str, str] | None:
        if self._stop.is_set():
            return "cancelled", "cancelled"
        elapsed = self.spent_s + self.clock() - self.started
        if elapsed + 2 * self.slowest_s > self.budget_s:
            return "budget", (
                f"another pair (about {2 * self.slowest_s:.0f} s) would pass the performance budget "
                f"({self.budget_s:g} s; {elapsed:.0f} s spent)"
            )
        return None


def run_held_series(ctx: RunContext, held: Held, case: CasePlan, results: CaseResults, servers: CaseServers) -> None:
    """The candidate's series against the held baseline, watched like a phase (a cancel, a death, a stall); the
    record lands on the candidate's performance section. A candidate that dies or stalls fails its case; a
    baseline that does fails the series (and its own case, once its hold ends)."""
    spec = bench_spec(ctx.profile)
    base_results = held.results
    section: CasePerformance | None = results.section(PERFORMANCE)
    base_section: CasePerformance | None = base_results.section(PERFORMANCE)
    if spec is None or section is None or base_section is None:
        return
    record = sequential.start(spec, ctx.plan.series_of(case.id), held.case.id, case.id)
    if section.status is not Status.PASSED or base_section.status is not Status.PASSED:
        record.stopped, record.reason = "failed", "a side's first repetitions did not all pass"
        section.sequential = record
        return
    writes = {c.id: _Writes(r, ctx.store.lock) for c, r in ((held.case, base_results), (case, results))}
    stop = threading.Event()
    budget = _Budget(ctx, results, stop)

    def publish() -> None:
        for w in writes.values():
            w.flush()
        ctx.store.flush()

    def work() -> SequentialRecord:
        base_section, cand_section = writes[held.case.id].section, writes[case.id].section
        assert base_section is not None and cand_section is not None
        cand_section.sequential = record
        try:
            targets = {side.id: _target(ctx, side) for side in (held.case, case)}
        except CompletionError as exc:  # a server that no longer answers its model card
            record.stopped, record.reason = "failed", str(exc)
            cand_section.status, cand_section.failure = Status.FAILED, f"sequential series: {exc}"
            publish()
            return record
        for section in (base_section, cand_section):
            section.status = Status.RUNNING
        clients = {held.case.id: held.servers.bench_client, case.id: servers.bench_client}  # each side's own

        def step(case_id: str, indices: list[int]):
            reps: list[Repetition] = []
            _repetitions(ctx, targets[case_id], clients[case_id], stop, indices, reps)
            return reps, None

        found = sequential.alternate(
            spec, record, base_section, cand_section, step=budget.timed(step), publish=publish, stop=budget.over
        )
        ctx.progress(f"series {held.case.id} vs {case.id}: {found.stopped} after {len(found.looks)} looks")
        return found

    def baseline_alive() -> None:
        try:
            held.servers.check()
            held.servers.check_progress()
        except (EngineDied, Stalled) as exc:
            raise BaselineLost(f"baseline {held.case.id}: {exc}") from exc

    def candidate_alive() -> None:
        try:
            servers.check()
            servers.check_progress()
        except EngineDied as exc:
            raise died(servers, exc, "performance series") from exc
        except Stalled as exc:
            raise CaseFailure(exc.stall.message, servers.api_log_tail()) from exc

    ctx.progress.enter(case.id, "performance series", [s.log_path for s in servers.servers])
    for s in (held.servers, servers):
        s.mark("performance")
    started = time.monotonic()
    try:
        call_watched(work, [ctx.flag.check, candidate_alive, baseline_alive], stop, clock=ctx.clock, sleep=ctx.sleep)
    except BaselineLost as exc:
        with ctx.store.lock:
            for w in writes.values():
                w.open = False
            record.stopped, record.reason = "failed", str(exc)
            flushed = base_results.section(PERFORMANCE)  # the writes' last copy, not the section read above
            flushed.status = Status.FAILED
            flushed.failure = f"sequential series: {exc}"
            results.section(PERFORMANCE).sequential = record
            ctx.store.flush()
    except BaseException:
        with ctx.store.lock:
            for w in writes.values():
                w.open = False
            for side in (base_results.section(PERFORMANCE), results.section(PERFORMANCE)):
                if side is not None and side.status is Status.RUNNING:
                    side.status = Status.CANCELLED if ctx.flag.is_set() else Status.FAILED
                    side.failure = side.failure or "sequential series stopped"
            ctx.store.flush()
        raise
    finally:
        results.timings.phases["performance series"] = round(time.monotonic() - started, 3)
        for w in writes.values():
            w.open = False
        ctx.store.flush()


def run_blocks(ctx: RunContext, planned: SeriesPlan) -> None:
    """A ``blocks`` series, its cases both run and torn down: each side launched afresh in turn (``run_block``)
    for a block of repetitions, warm-ups first (a fresh launch is cold), until decided (``sequential.alternate``).
    A block that fails (its launch, a repetition, its hygiene) ends the series and fails its side's case, with the
    block's record; a cancel ends it as cancelled. The record lands on the candidate's performance section."""
    spec = bench_spec(ctx.profile)
    cases = {c.id: c for c in ctx.plan.cases}
    found = {side: ctx.store.results.cases.get(side) for side in (planned.baseline, planned.candidate)}
    base_results, results = found[planned.baseline], found[planned.candidate]
    section: CasePerformance | None = results.section(PERFORMANCE) if results is not None else None
    if spec is None or base_results is None or results is None or section is None:
        return
    record = sequential.start(spec, planned, planned.baseline, planned.candidate)
    record.blocks = [_first_block(found[side], spec.repetitions) for side in (planned.lead, _other(planned))]
    section.sequential = record
    if ctx.flag.is_set():
        record.stopped, record.reason = "cancelled", "the run was cancelled before the blocks"
        ctx.store.flush()
        return
    base_section: CasePerformance | None = base_results.section(PERFORMANCE)
    if base_section is None or any(
        r.status is not Status.PASSED or (side := r.section(PERFORMANCE)) is None or side.status is not Status.PASSED
        for r in found.values()
    ):
        record.stopped, record.reason = "failed", "a side's case (its first block) did not pass"
        ctx.store.flush()
        return
    stop = threading.Event()
    budget = _Budget(ctx, results, stop)
    sections = {planned.baseline: base_section, planned.candidate: section}

    def step(case_id: str, indices: list[int]):
        number = 1 + sum(1 for b in record.blocks if b.side == case_id)
        reps: list[Repetition] = []

        def work(servers: CaseServers, stopped: threading.Event) -> None:
            target = _target(ctx, cases[case_id])
            client = servers.bench_client  # the block's launch's own, started with its servers
            for warmup in range(1, spec.warmups + 1):
                rep = _repetition(ctx, target, client, stopped, warmup, kind=f"block{number}-warmup")
                if rep.status is not Status.PASSED:
                    raise CaseFailure(f"warm-up {warmup} of block {number}: {rep.failure}")
            _repetitions(ctx, target, client, stopped, indices, reps)

        ctx.progress(f"series {planned.baseline} vs {planned.candidate}: block {number} of {case_id}")
        block = run_block(ctx, cases[case_id], f"{planned.comparison}-block-{number}", work)
        record.blocks.append(_block_record(ctx, block, number, reps))
        ctx.store.flush()
        if block.status is Status.CANCELLED:
            stop.set()
        failure = None if block.status is Status.PASSED else f"block {number}: {block.failure or block.status}"
        return reps, failure

    def publish() -> None:
        ctx.store.flush()

    started = time.monotonic()
    sequential.alternate(
        spec,
        record,
        sections[planned.baseline],
        sections[planned.candidate],
        step=budget.timed(step),
        publish=publish,
        stop=budget.over,
        lead=planned.lead,
    )
    if record.stopped == "failed" and ctx.flag.is_set():  # a block stopped by the cancel
        record.stopped = "cancelled"
    for side, section in sections.items():
        if section.status.is_failure and ctx.flag.is_set():
            section.status = Status.CANCELLED
        case = found[side]
        ended = section.status.is_failure or section.status is Status.CANCELLED
        if case is not None and case.status is Status.PASSED and ended:
            case.status, case.failure = section.status, f"performance: {section.failure or section.status}"
    record.block_effects = blocks.effects(record, sections, spec.metrics)
    results.timings.phases["performance series"] = round(time.monotonic() - started, 3)
    ctx.progress(
        f"series {planned.baseline} vs {planned.candidate}: {record.stopped} after {len(record.looks)} looks, "
        f"{record.launches} added launches"
    )
    ctx.store.flush()


def _other(planned: SeriesPlan) -> str:
    return planned.candidate if planned.lead == planned.baseline else planned.baseline


def _first_block(case: CaseResults | None, count: int) -> BlockRecord:
    """A side's first block: its case's own launch (its processes and hygiene are the case's record)."""
    assert case is not None
    return BlockRecord(
        side=case.id,
        block=1,
        repetitions=list(range(1, count + 1)),
        status=case.status,
        failure=case.failure,
        launch_to_ready_s=case.timings.launch_to_ready_s,
        teardown_s=case.timings.teardown_s,
    )


def _block_record(ctx: RunContext, block: CaseResults, number: int, reps: Sequence[Repetition]) -> BlockRecord:
    return BlockRecord(
        side=block.id,
        block=number,
        repetitions=[r.index for r in reps],
        status=block.status,
        failure=block.failure,
        launch_to_ready_s=block.timings.launch_to_ready_s,
        teardown_s=block.timings.teardown_s,
        processes=block.processes,
        hygiene=block.hygiene,
        log_tail=block.log_tail,
    )
