"""Where a ranged series gets both of its servers: the runner keeps a comparison's baseline case up while the cases
after it run, so its candidate can alternate repetitions with it (``afd_e2e.workloads.sequential``).

Cases still run one after another and each is launched, checked and torn down by ``run_case`` as before; the only
change is when a baseline's teardown happens: a case that is the baseline of a ranged performance comparison is
torn down after its last such candidate (the cases in between run nested inside its ``while_up``). A pair is run
as a series only where that is possible and honest: ``workloads.bench.repetitions`` is a range, the comparison
measures performance and is no control, both cases run the performance phase on this agent alone, the baseline is
planned first, and no case that runs while the baseline is held shares a device with it (two servers cannot share
a GPU's memory); holds nest. Any other ranged pair keeps ``min`` repetitions a side, and its record says why.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from afd_e2e.plan.model import CasePlan, ComparisonPlan, RunPlan
from afd_e2e.profile import Profile, catalogue
from afd_e2e.results.model import CaseResults, SequentialRecord
from afd_e2e.results.status import Status
from afd_e2e.runner.cancellation import call_watched
from afd_e2e.runner.case import CaseFailure, RunContext, died, new_case_results, run_case
from afd_e2e.runner.server import CaseServers, Stalled
from afd_e2e.runner.watch import EngineDied
from afd_e2e.system.child_env import client_environment
from afd_e2e.system.executables import resolve_executable
from afd_e2e.system.markers import marker_env
from afd_e2e.workloads import bench, sequential
from afd_e2e.workloads.completions import CompletionError, served_model_root
from afd_e2e.workloads.phases import PROGRESS_EVERY_S


@dataclass(frozen=True)
class Held:
    """A baseline case kept up after its phases for the series of the cases after it."""

    case: CasePlan
    results: CaseResults
    servers: CaseServers


class BaselineLost(Exception):
    """The held baseline died or stalled during the series: the series fails, the candidate case does not."""


def _pair_problem(plan: RunPlan, cmp: ComparisonPlan) -> str | None:
    """Why this ranged comparison cannot run as an alternating series on its own, or None when it can."""
    cases = {c.id: c for c in plan.cases}
    base, cand = cases.get(cmp.baseline), cases.get(cmp.candidate)
    if base is None or cand is None or "performance" not in base.phases or "performance" not in cand.phases:
        return "one of its cases does not run the performance phase here"
    if base.remote_processes or cand.remote_processes:
        return "a case placed on several agents is not held up for a series"
    if plan.cases.index(base) > plan.cases.index(cand):
        return f"the baseline {base.id} is planned after the candidate {cand.id}"
    return None


def _hold_problem(plan: RunPlan, series: Mapping[str, str]) -> str | None:
    """Why these series cannot all be held: a case that runs while a baseline is held (its candidates and the
    cases between) sharing one of its devices (two servers cannot share a GPU's memory), or two holds that cross
    (each baseline is torn down after its last candidate, so holds must nest)."""
    order = [c.id for c in plan.cases]
    holds = {}
    for candidate, baseline in series.items():
        first, last = holds.get(baseline, (order.index(baseline), order.index(baseline)))
        holds[baseline] = (first, max(last, order.index(candidate)))
    for baseline, (first, last) in holds.items():
        devices = set(plan.cases[first].devices)
        for case in plan.cases[first + 1 : last + 1]:
            if shared := sorted(devices & set(case.devices)):
                return f"{case.id} runs while {baseline} is held and shares devices {shared} with it"
        for other, (o_first, o_last) in holds.items():
            if first < o_first <= last < o_last:
                return f"holding {baseline} until {order[last]} would cross holding {other} until {order[o_last]}"
    return None


def plan_series(profile: Profile, plan: RunPlan) -> tuple[dict[str, str], dict[str, SequentialRecord]]:
    """The ranged comparisons run as series (candidate id -> baseline id, one series per candidate), and the
    records of those that cannot be (candidate id -> a record saying why; ``min`` repetitions a side). Pairs are
    taken in the plan's comparison order, each only where it and every hold so far can run."""
    series: dict[str, str] = {}
    refused: dict[str, SequentialRecord] = {}
    spec = profile.bench
    if spec is None or not spec.ranged:
        return series, refused
    for cmp in plan.comparisons:
        if cmp.control or "performance" not in cmp.measures:
            continue
        problem = _pair_problem(plan, cmp)
        if problem is None and cmp.candidate in series:
            problem = f"{cmp.candidate} already runs a series against {series[cmp.candidate]}"
        if problem is None:
            problem = _hold_problem(plan, {**series, cmp.candidate: cmp.baseline})
        if problem is None:
            series[cmp.candidate] = cmp.baseline
            continue
        record = SequentialRecord(cmp.baseline, cmp.candidate, spec.repetitions, spec.most_repetitions)
        record.stopped, record.reason = "not run", f"{problem}: {spec.repetitions} repetitions a side"
        refused.setdefault(cmp.candidate, record)
    return series, refused


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
        self.section = copy.deepcopy(self.results.performance)

    def flush(self) -> None:
        with self.lock:
            if self.open and self.section is not None:
                self.results.performance = copy.deepcopy(self.section)


def run_cases(ctx: RunContext, cases: Sequence[CasePlan]) -> None:
    """Every case in order, each baseline of a series held up until its last candidate has run (``plan_series``);
    what the series cannot run as is recorded on its candidate's performance section."""
    series, refused = plan_series(ctx.profile, ctx.plan)
    _run_cases(ctx, list(cases), series, {}, _State())
    for candidate, record in refused.items():
        found = ctx.store.results.cases.get(candidate)
        if found is not None and found.performance is not None:
            found.performance.sequential = record
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
                run_series(ctx, baseline, case, results, servers)
            if inner:
                ran_inner = True
                _run_cases(ctx, inner, series, {**held, case.id: Held(case, results, servers)}, state)

        results = run_case(ctx, case, while_up=while_up)
        if kept_up(results):
            state.kept = case.id
        if inner and not ran_inner:  # the case failed before it could be held: the rest runs without it
            _run_cases(ctx, inner, series, held, state)


def run_series(ctx: RunContext, held: Held, case: CasePlan, results: CaseResults, servers: CaseServers) -> None:
    """The candidate's series against the held baseline, watched like a phase (a cancel, a death, a stall); the
    record lands on the candidate's performance section. A candidate that dies or stalls fails its case; a
    baseline that does fails the series (and its own case, once its hold ends)."""
    spec = ctx.profile.bench
    base_results = held.results
    if spec is None or results.performance is None or base_results.performance is None:
        return
    record = sequential.start(spec, held.case.id, case.id)
    if results.performance.status is not Status.PASSED or base_results.performance.status is not Status.PASSED:
        record.stopped, record.reason = "failed", "a side's first repetitions did not all pass"
        results.performance.sequential = record
        return
    budget_s = catalogue.phase("performance").budget.seconds(ctx.profile)
    spent_s = results.timings.phases.get("performance", 0.0)
    started = time.monotonic()
    writes = {c.id: _Writes(r, ctx.store.lock) for c, r in ((held.case, base_results), (case, results))}
    stop = threading.Event()
    executable = resolve_executable(ctx.profile.engine.executable)

    def target(side: CasePlan) -> bench.Target:
        root = served_model_root(side.base_url, side.served_model_name, timeout_s=ctx.profile.budgets.request_s)
        markers = marker_env(ctx.run_id, side.id, "bench")
        env = bench.client_env(client_environment(ctx.base_env, markers=markers))
        return bench.Target(side.id, side.base_url, side.served_model_name, root, env)

    def publish() -> None:
        for w in writes.values():
            w.flush()
        ctx.store.flush()

    def series(scope: contextlib.ExitStack) -> SequentialRecord:
        base_section, cand_section = writes[held.case.id].section, writes[case.id].section
        assert base_section is not None and cand_section is not None
        cand_section.sequential = record
        try:
            targets = {side.id: target(side) for side in (held.case, case)}
        except CompletionError as exc:  # a server that no longer answers its model card
            record.stopped, record.reason = "failed", str(exc)
            cand_section.status, cand_section.failure = Status.FAILED, f"sequential series: {exc}"
            publish()
            return record
        for section in (base_section, cand_section):
            section.status = Status.RUNNING
        clients = {
            side_id: scope.enter_context(bench.case_client(executable, side, ctx.layout.out_dir))
            for side_id, side in targets.items()
        }

        def step(case_id: str, index: int):
            rep, _ended = bench.run_one(
                spec,
                targets[case_id],
                executable=executable,
                out_dir=ctx.layout.out_dir,
                kind="rep",
                index=index,
                total=spec.most_repetitions,
                progress=lambda line: ctx.progress(f"{case_id}: {line}"),
                cancelled=stop,
                heartbeat_s=PROGRESS_EVERY_S,
                client=clients[case_id],
            )
            return rep

        def over_budget(slowest_s: float) -> tuple[str, str] | None:
            if stop.is_set():
                return "cancelled", "cancelled"
            elapsed = spent_s + time.monotonic() - started
            if elapsed + 2 * slowest_s > budget_s:
                return "budget", (
                    f"another pair (about {2 * slowest_s:.0f} s) would pass the performance budget "
                    f"({budget_s:g} s; {elapsed:.0f} s spent)"
                )
            return None

        found = sequential.alternate(
            spec, record, base_section, cand_section, step=step, publish=publish, stop=over_budget
        )
        ctx.progress(f"series {held.case.id} vs {case.id}: {found.stopped} after {len(found.looks)} looks")
        return found

    def work() -> SequentialRecord:
        with contextlib.ExitStack() as scope:  # the sides' warm bench clients end with the series
            return series(scope)

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
    try:
        call_watched(work, [ctx.flag.check, candidate_alive, baseline_alive], stop)
    except BaselineLost as exc:
        with ctx.store.lock:
            for w in writes.values():
                w.open = False
            record.stopped, record.reason = "failed", str(exc)
            base_results.performance.status = Status.FAILED
            base_results.performance.failure = f"sequential series: {exc}"
            results.performance.sequential = record
            ctx.store.flush()
    except BaseException:
        with ctx.store.lock:
            for w in writes.values():
                w.open = False
            for r in (base_results, results):
                if r.performance is not None and r.performance.status is Status.RUNNING:
                    r.performance.status = Status.CANCELLED if ctx.flag.is_set() else Status.FAILED
                    r.performance.failure = r.performance.failure or "sequential series stopped"
            ctx.store.flush()
        raise
    finally:
        results.timings.phases["performance series"] = round(time.monotonic() - started, 3)
        for w in writes.values():
            w.open = False
        ctx.store.flush()
