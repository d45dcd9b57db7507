"""How each ranged performance comparison adds repetitions until decided, chosen before anything runs. Pure.

A comparison whose ``workloads.bench.repetitions`` is a range runs as a **series**: after each side's first ``min``
repetitions (its case's own performance phase) the two sides alternate until every gated metric is decided, the
range's ``max``, or the performance budget (``afd_e2e.workloads.sequential``). They alternate in one of two ways
(``workloads.bench.alternation``):

- ``repetitions``: the runner keeps the baseline's servers up while the candidate runs, and the pair adds one
  repetition each, looking after every pair. Two servers must be up at once, so no case that runs while the
  baseline is held may share a device with it, and holds must nest.
- ``blocks``: the pair shares its devices (the seed's native DP8/EP8 and AFD 4A4F on the same eight GPUs), so each
  side is launched afresh for each block of ``block_size`` repetitions, base, candidate, base, candidate, ...,
  torn down and checked between blocks like any case. The first look comes after two blocks a side: with one
  launch a side, a launch's own level (clocks, placement, a neighbour) cannot be told from the change.

``auto`` (the default) takes ``repetitions`` where the pair can be held, ``blocks`` where it shares devices.
What cannot run as either keeps ``min`` repetitions a side, and its record says why. Each plan states its added
launches and its worst-case added time, from the profile's budgets, before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from afd_e2e.plan.model import BLOCKS, NOT_RUN, REPETITIONS, CasePlan, ComparisonPlan, SeriesPlan
from afd_e2e.profile import Profile, catalogue
from afd_e2e.profile.bench_spec import BenchSpec, bench_spec


def _pair_problem(cases: Mapping[str, CasePlan], cmp: ComparisonPlan) -> str | None:
    """Why this comparison cannot run as a series at all, or None when it can."""
    base, cand = cases.get(cmp.baseline), cases.get(cmp.candidate)
    if base is None or cand is None or "performance" not in base.phases or "performance" not in cand.phases:
        return "one of its cases does not run the performance phase here"
    if base.remote_processes or cand.remote_processes:
        return "a case placed on several agents is not relaunched or held up for a series"
    return None


def _hold_problem(cases: Sequence[CasePlan], held: Mapping[str, str]) -> str | None:
    """Why these held series (candidate -> baseline) cannot all be held: a case that runs while a baseline is held
    (its candidates and the cases between) sharing one of its devices (two servers cannot share a GPU's memory),
    or two holds that cross (each baseline is torn down after its last candidate, so holds must nest)."""
    order = [c.id for c in cases]
    holds = {}
    for candidate, baseline in held.items():
        first, last = holds.get(baseline, (order.index(baseline), order.index(baseline)))
        holds[baseline] = (first, max(last, order.index(candidate)))
    for baseline, (first, last) in holds.items():
        devices = set(cases[first].devices)
        for case in cases[first + 1 : last + 1]:
            if shared := sorted(devices & set(case.devices)):
                return f"{case.id} runs while {baseline} is held and shares devices {shared} with it"
        for other, (o_first, o_last) in holds.items():
            if first < o_first <= last < o_last:
                return f"holding {baseline} until {order[last]} would cross holding {other} until {order[o_last]}"
    return None


def _blocks_problem(spec: BenchSpec) -> str | None:
    if spec.most_repetitions < spec.repetitions + spec.block:
        return (
            f"blocks of {spec.block} need room for two a side, but repetitions run {spec.repetitions} to "
            f"{spec.most_repetitions}"
        )
    return None


def _costed(profile: Profile, spec: BenchSpec, series: SeriesPlan) -> SeriesPlan:
    """The series with its looks, launches and worst-case added time (every repetition and launch at its budget)."""
    repetition_s = profile.budgets.seconds("bench_repetition_s")
    added = series.added_blocks
    if series.alternation == BLOCKS:
        per_block = profile.budgets.startup_s + (spec.warmups + series.step) * repetition_s + profile.budgets.teardown_s
        launches, worst_s = 2 * added, 2 * added * per_block
    else:
        launches, worst_s = 0, 2 * added * repetition_s
    return replace(
        series,
        launches=launches,
        worst_s=worst_s,
        budget_s=catalogue.phase("performance").budget.seconds(profile),
    )


def _alternated(spec: BenchSpec, plain: SeriesPlan, hold: str | None) -> SeriesPlan:
    """The series as ``workloads.bench.alternation`` asks, given why the pair cannot be held (None: it can)."""
    if spec.alternation == BLOCKS or (spec.alternation == "auto" and hold is not None):
        why = "asked (workloads.bench.alternation: blocks)" if spec.alternation == BLOCKS else f"auto: {hold}"
        if problem := _blocks_problem(spec):
            return replace(plain, alternation=NOT_RUN, reason=f"{why}; {problem}")
        return replace(plain, alternation=BLOCKS, reason=why, step=spec.block)
    if hold is None:
        why = "asked" if spec.alternation == REPETITIONS else "auto: both servers can be up at once"
        return replace(plain, alternation=REPETITIONS, reason=why)
    return replace(plain, alternation=NOT_RUN, reason=f"{hold}, and alternation: repetitions was asked")


def plan_series(
    profile: Profile, cases: Sequence[CasePlan], comparisons: Sequence[ComparisonPlan]
) -> tuple[SeriesPlan, ...]:
    """Every ranged performance comparison's series, in the plan's comparison order: a pair is held only where it
    and every hold so far can be; a candidate runs one series."""
    spec = bench_spec(profile)
    if spec is None or not spec.ranged:
        return ()
    by_id = {c.id: c for c in cases}
    order = [c.id for c in cases]
    held: dict[str, str] = {}
    planned: dict[str, str] = {}  # candidate -> its series' baseline
    found = []
    for cmp in comparisons:
        if cmp.control or "performance" not in cmp.measures:
            continue
        lead = min((cmp.baseline, cmp.candidate), key=lambda case_id: order.index(case_id) if case_id in order else 0)
        plain = SeriesPlan(
            cmp.id, cmp.baseline, cmp.candidate, NOT_RUN, "", spec.repetitions, spec.most_repetitions, lead=lead
        )
        problem = _pair_problem(by_id, cmp)
        if problem is None and cmp.candidate in planned:
            problem = f"{cmp.candidate} already runs a series against {planned[cmp.candidate]}"
        if problem is not None:
            found.append(replace(plain, reason=problem))
            continue
        hold = _hold_problem(cases, {**held, cmp.candidate: cmp.baseline})
        if order.index(cmp.baseline) > order.index(cmp.candidate):
            hold = f"the baseline {cmp.baseline} is planned after the candidate {cmp.candidate}, so it cannot be held"
        if shared := sorted(set(by_id[cmp.baseline].devices) & set(by_id[cmp.candidate].devices)):
            hold = f"the pair shares devices {shared}, so both cannot be up at once"
        series = _alternated(spec, plain, hold)
        if series.alternation == REPETITIONS:
            held[cmp.candidate] = cmp.baseline
        if series.alternation != NOT_RUN:
            planned[cmp.candidate] = cmp.baseline
            series = _costed(profile, spec, series)
        found.append(series)
    return tuple(_unclashed(series, cases, held) for series in found)


def _unclashed(series: SeriesPlan, cases: Sequence[CasePlan], held: Mapping[str, str]) -> SeriesPlan:
    """A blocks series relaunches its sides once the later of its cases is over: not where a held baseline is
    still up then and shares a device with one of the sides (two servers cannot share a GPU's memory)."""
    if series.alternation != BLOCKS:
        return series
    order = [c.id for c in cases]
    at = max(order.index(series.baseline), order.index(series.candidate))
    sides = {d for c in cases if c.id in (series.baseline, series.candidate) for d in c.devices}
    for candidate, baseline in held.items():
        shared = sorted(sides & set(cases[order.index(baseline)].devices))
        if shared and order.index(baseline) < at <= order.index(candidate):
            why = f"{series.reason}; but {baseline} is held up then and shares devices {shared} with its relaunches"
            return replace(series, alternation=NOT_RUN, reason=why, step=1, launches=0, worst_s=0.0)
    return series
