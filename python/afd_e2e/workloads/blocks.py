"""A blocks series' block effect: each side's blocks (fresh launches) against each other. Pure.

Repetitions on one launch share that launch's level (clock boost, memory placement, a neighbour on the host); a
blocks series launches each side several times, so it can tell how much a side moved between its own launches. A
one-way analysis of variance of a metric's repetitions grouped by block says whether the blocks differ beyond the
repetitions' own noise (``BEYOND_NOISE_P``); the drift is the last block's mean against the first's. A side whose
blocks differ is named in the report ("base drifted +4.1% between its blocks"): a comparison between sides whose
own launches disagree that much says less than its interval suggests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from afd_e2e.profile.bench_spec import MetricGate
from afd_e2e.results.performance_records import BlockEffect, CasePerformance, SequentialRecord
from afd_e2e.results.status import Status
from afd_e2e.workloads.stats import f_test_p, mean

BEYOND_NOISE_P = 0.01  # per side and metric: a handful of tests a series, so a false "drifted" stays rare


def effects(
    record: SequentialRecord, sections: Mapping[str, CasePerformance], metrics: Sequence[MetricGate]
) -> list[BlockEffect]:
    """Every side with two blocks or more, every metric its passed repetitions measured."""
    found = []
    for side, section in sections.items():
        by_index = {r.index: r for r in section.repetitions if r.status is Status.PASSED}
        side_blocks = [b for b in record.blocks if b.side == side]
        for gate in metrics:
            key = gate.metric.key
            groups = [
                [by_index[i].metrics[key] for i in b.repetitions if i in by_index and key in by_index[i].metrics]
                for b in side_blocks
            ]
            groups = [g for g in groups if g]
            if len(groups) < 2:
                continue
            means = [mean(g) for g in groups]
            drift = (means[-1] - means[0]) / abs(means[0]) * 100.0 if means[0] else 0.0
            p = f_test_p(groups)
            found.append(BlockEffect(side, key, means, drift, p, p is not None and p < BEYOND_NOISE_P))
    return found


def drift_lines(record: SequentialRecord) -> list[str]:
    """The sides whose blocks differ beyond the noise, in words."""
    return [
        f"{e.side} drifted {e.drift_pct:+.1f}% on {e.metric} between its blocks (block means "
        + ", ".join(f"{m:.4g}" for m in e.block_means)
        + f"; p={e.p_value:.2g})"
        for e in record.block_effects
        if e.beyond_noise and e.p_value is not None
    ]
