"""A ranged series (``workloads.bench.repetitions: {min, max}``): after ``min`` formal repetitions on each side, a
comparison's two cases alternate, adding repetitions to each in turn, and the pair is looked at after every added
pair, until every gated metric is decided, the series reaches ``max`` a side, or the caller says stop (the phase
budget, a cancel). How they alternate is the plan's (``plan/series.py``): one repetition each with both servers up
(``repetitions``), or a block of ``step`` repetitions each on a fresh launch (``blocks``), whose first look comes
after the second block a side.

The looks are planned (``plan.model.planned_looks``) and each spends an equal share of both error rates
(Bonferroni, ``stats``): stopping at whichever look first decides keeps the chance of a false ``worse`` at or under
the single-look 2.5%, and the final comparison judges the last look's repetitions at the same share, so the verdict
reported is the one that stopped the series. Every look is recorded (``SequentialRecord``), and so is the order
the repetitions ran in. Alternating keeps slow drift of the machine (thermal, a noisy neighbour) from landing on
one side only.

The driver knows nothing of servers: ``step(case_id, indices)`` runs those repetitions on that case (the runner
keeps both up or launches a block, ``afd_e2e.runner.series_servers``); the tests drive it with simulated repetitions.
"""

from __future__ import annotations

from collections.abc import Callable

from afd_e2e.plan.model import REPETITIONS, SeriesPlan, first_look
from afd_e2e.profile.bench_spec import BenchSpec
from afd_e2e.results.performance_records import CasePerformance, PerformanceLook, Repetition, SequentialRecord
from afd_e2e.results.status import Status, Verdict
from afd_e2e.workloads import performance_comparison

# (case id, the 1-based indices to run) -> the repetitions run (up to the first that did not pass) and why the step
# failed where no repetition says so (a block's launch or hygiene), else None
Step = Callable[[str, list[int]], tuple[list[Repetition], str | None]]
Stop = Callable[[], tuple[str, str] | None]  # () -> (stopped, reason) before the next pair, or None: go on


def start(spec: BenchSpec, series: SeriesPlan | None, baseline_id: str, candidate_id: str) -> SequentialRecord:
    """The record of a series about to run: each side's first ``min`` repetitions, in the order the cases ran.
    ``series``: the plan's (None: one repetition at a time)."""
    first = list(range(1, spec.repetitions + 1))
    sides = [baseline_id, candidate_id]
    if series is not None and series.lead != baseline_id:
        sides.reverse()
    return SequentialRecord(
        baseline_id,
        candidate_id,
        spec.repetitions,
        spec.most_repetitions,
        order=[f"{side} rep {i}" for side in sides for i in first],
        baseline_repetitions=list(first),
        candidate_repetitions=list(first),
        alternation=series.alternation if series is not None else REPETITIONS,
        step=series.step if series is not None else 1,
    )


def _look(spec: BenchSpec, record: SequentialRecord, base: CasePerformance, cand: CasePerformance) -> PerformanceLook:
    verdicts = performance_comparison.look(
        base,
        cand,
        record,
        threshold_pct=spec.parity_threshold_pct,
        metrics=spec.metrics,
        looks=record.planned_looks,
        gated_throughput=spec.gated_throughput,
    )
    passed = [
        sum(r.status is Status.PASSED and r.index in indices for r in section.repetitions)
        for section, indices in ((base, record.baseline_repetitions), (cand, record.candidate_repetitions))
    ]
    decided = all(v is not Verdict.INCONCLUSIVE for v in verdicts.values())
    return PerformanceLook(len(record.looks) + 1, passed[0], passed[1], verdicts, decided)


def alternate(
    spec: BenchSpec,
    record: SequentialRecord,
    baseline: CasePerformance,
    candidate: CasePerformance,
    *,
    step: Step,
    publish: Callable[[], None],
    stop: Stop,
    lead: str | None = None,
) -> SequentialRecord:
    """Look (from the plan's first look on), and while undecided add a step (a repetition or a block) to each side
    in turn, ``lead`` first (default the baseline), look again; the added repetitions land in each side's section,
    a failed step fails its side and ends the series. Both sections' statuses are what their repetitions make them
    once it ends."""
    sides = [
        (record.baseline, baseline, record.baseline_repetitions),
        (record.candidate, candidate, record.candidate_repetitions),
    ]
    if lead == record.candidate:
        sides.reverse()
    looks_from = first_look(record.min, record.step, record.alternation)
    while True:
        have = len(record.candidate_repetitions)
        if have >= looks_from:
            found = _look(spec, record, baseline, candidate)
            record.looks.append(found)
            publish()
            if found.decided:
                record.stopped = "decided"
                record.reason = (
                    f"every gated metric decided at look {found.look}"
                    if found.verdicts
                    else "no gated metric (on_worse: fail or require: parity): nothing to decide"
                )
                break
        if have >= record.max:
            record.stopped, record.reason = "max", f"undecided after {record.max} repetitions a side (the range's max)"
            break
        if (stopped := stop()) is not None:
            record.stopped, record.reason = stopped
            break
        count = min(record.step, record.max - have)
        if _add(record, sides, step, count):
            break
        publish()
    for _case_id, section, _indices in sides:
        section.status = _status(section)
    publish()
    return record


def _add(record: SequentialRecord, sides: list[tuple[str, CasePerformance, list[int]]], step: Step, count: int) -> bool:
    """One step of ``count`` repetitions a side, in turn; True when one failed (the series ends, recorded)."""
    for case_id, section, indices in sides:
        first = len(section.repetitions) + 1
        reps, failure = step(case_id, list(range(first, first + count)))
        for rep in reps:
            section.repetitions.append(rep)
            indices.append(rep.index)
            record.order.append(f"{case_id} rep {rep.index}")
        failed = next((r for r in reps if r.status is not Status.PASSED), None)
        if failed is not None:
            section.failure = section.failure or f"rep {failed.index} (sequential series): {failed.failure}"
            record.stopped = "cancelled" if failed.status is Status.CANCELLED else "failed"
            record.reason = f"{case_id} rep {failed.index}: {failed.failure}"
            return True
        if failure is not None or len(reps) < count:
            failure = failure or f"ran {len(reps)} of {count} repetitions"
            section.failure = section.failure or f"sequential series: {failure}"
            record.stopped, record.reason = "failed", f"{case_id}: {failure}"
            return True
    return False


def _status(section: CasePerformance) -> Status:
    if any(r.status is Status.CANCELLED for r in section.repetitions):
        return Status.CANCELLED
    return Status.FAILED if section.failure else Status.PASSED
