"""A ranged series (``workloads.bench.repetitions: {min, max}``): after ``min`` formal repetitions on each side, a
comparison's two cases alternate one more repetition each (baseline, then candidate) and the pair is looked at
after every added pair, until every gated metric is decided, the series reaches ``max`` a side, or the caller says
stop (the phase budget, a cancel).

The looks are planned, ``max - min + 1`` of them, and each spends an equal share of both error rates (Bonferroni,
``stats``): stopping at whichever look first decides keeps the chance of a false ``worse`` at or under the
single-look 2.5%, and the final comparison judges the last look's repetitions at the same share, so the verdict
reported is the one that stopped the series. Every look is recorded (``SequentialRecord``), and so is the order
the repetitions ran in. Alternating one for one keeps slow drift of the machine (thermal, a noisy neighbour) from
landing on one side only.

The driver knows nothing of servers: ``step(case_id, index)`` runs one repetition on that case's server (the
runner keeps both up, ``afd_e2e.runner.sequential``); the tests drive it with simulated repetitions.
"""

from __future__ import annotations

from collections.abc import Callable

from afd_e2e.profile import BenchSpec
from afd_e2e.results.model import CasePerformance, PerformanceLook, Repetition, SequentialRecord
from afd_e2e.results.status import Status, Verdict
from afd_e2e.workloads import performance

Step = Callable[[str, int], Repetition]  # (case id, 1-based index) -> the repetition, run on that case's server
Stop = Callable[[float], tuple[str, str] | None]  # (slowest repetition so far, s) -> (stopped, reason) or go on


def start(spec: BenchSpec, baseline_id: str, candidate_id: str) -> SequentialRecord:
    """The record of a series about to run: each side's first ``min`` repetitions, baseline's first (the cases
    ran one after the other)."""
    first = list(range(1, spec.repetitions + 1))
    return SequentialRecord(
        baseline_id,
        candidate_id,
        spec.repetitions,
        spec.most_repetitions,
        order=[f"{baseline_id} rep {i}" for i in first] + [f"{candidate_id} rep {i}" for i in first],
        baseline_repetitions=list(first),
        candidate_repetitions=list(first),
    )


def _look(spec: BenchSpec, record: SequentialRecord, base: CasePerformance, cand: CasePerformance) -> PerformanceLook:
    verdicts = performance.look(
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
) -> SequentialRecord:
    """Look, and while undecided add a repetition to the baseline then one to the candidate, look again; the
    added repetitions land in each side's section, a failed one fails its side and ends the series. Both
    sections' statuses are what their repetitions make them once it ends."""
    slowest = max((r.duration_s or 0.0 for s in (baseline, candidate) for r in s.repetitions), default=0.0)
    sides = (
        (record.baseline, baseline, record.baseline_repetitions),
        (record.candidate, candidate, record.candidate_repetitions),
    )
    while True:
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
        if len(record.candidate_repetitions) >= record.max:
            record.stopped, record.reason = "max", f"undecided after {record.max} repetitions a side (the range's max)"
            break
        if (stopped := stop(slowest)) is not None:
            record.stopped, record.reason = stopped
            break
        failed = None
        for case_id, section, indices in sides:
            index = len(section.repetitions) + 1
            rep = step(case_id, index)
            section.repetitions.append(rep)
            indices.append(index)
            record.order.append(f"{case_id} rep {index}")
            slowest = max(slowest, rep.duration_s or 0.0)
            if rep.status is not Status.PASSED:
                failed = (case_id, section, rep)
                break
        if failed is not None:
            case_id, section, rep = failed
            section.failure = section.failure or f"rep {rep.index} (sequential series): {rep.failure}"
            record.stopped = "cancelled" if rep.status is Status.CANCELLED else "failed"
            record.reason = f"{case_id} rep {rep.index}: {rep.failure}"
            break
    for _case_id, section, _indices in sides:
        section.status = _status(section)
    publish()
    return record


def _status(section: CasePerformance) -> Status:
    if any(r.status is Status.CANCELLED for r in section.repetitions):
        return Status.CANCELLED
    return Status.FAILED if section.failure else Status.PASSED
