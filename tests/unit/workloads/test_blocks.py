"""Unit tier: a blocks series' block effect (``workloads.blocks``): the one-way analysis of variance against the
two-sample t-test it equals for two groups, and a side whose launches differ named while one whose launches agree
is not."""

from __future__ import annotations

import math

import pytest

from afd_e2e.profile.bench_spec import BENCH_METRICS, MetricGate
from afd_e2e.results.performance_records import BlockRecord, CasePerformance, Repetition, SequentialRecord
from afd_e2e.results.status import Status
from afd_e2e.workloads import blocks
from afd_e2e.workloads.stats import f_test_p, student_t_cdf

TPOT = MetricGate(next(m for m in BENCH_METRICS if m.key == "mean_tpot_ms"), "fail", 5.0)


def test_two_groups_give_the_pooled_t_tests_p_value():
    """[1,2,3] vs [4,5,6]: F = 13.5 on (1, 4) degrees of freedom, t = sqrt(F); p = 0.0213."""
    p = f_test_p([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert p == pytest.approx(2 * (1 - student_t_cdf(math.sqrt(13.5), 4)), rel=1e-9)
    assert p == pytest.approx(0.0213, abs=5e-4)


def test_no_spread_within_blocks_is_judged_by_the_means_alone_and_single_values_by_nothing():
    assert f_test_p([[1.0, 1.0], [2.0, 2.0]]) == 0.0
    assert f_test_p([[1.0, 1.0], [1.0, 1.0]]) == 1.0
    assert f_test_p([[1.0], [2.0]]) is None


def _section(values):
    reps = [
        Repetition(
            index=i, status=Status.PASSED, failure=None, path="", log="", num_prompts=8, metrics={"mean_tpot_ms": v}
        )
        for i, v in enumerate(values, 1)
    ]
    return CasePerformance(Status.PASSED, repetitions=reps)


def test_a_side_that_moved_between_its_launches_is_named_and_a_steady_one_is_not():
    record = SequentialRecord("base", "cand", 2, 6, alternation="blocks", step=2)
    record.blocks = [BlockRecord(side, n, [2 * n - 1, 2 * n]) for n in (1, 2, 3) for side in ("base", "cand")]
    sections = {
        "base": _section([100.0, 100.4, 104.0, 104.3, 104.1, 104.4]),  # launch 2 and 3 ~4% slower
        "cand": _section([100.0, 100.5, 100.2, 100.4, 100.1, 100.3]),
    }
    record.block_effects = blocks.effects(record, sections, [TPOT])
    base, cand = record.block_effects
    assert (base.side, base.beyond_noise, round(base.drift_pct, 1)) == ("base", True, 4.0)
    assert (cand.side, cand.beyond_noise) == ("cand", False)
    (line,) = blocks.drift_lines(record)
    assert line.startswith("base drifted +4.0% on mean_tpot_ms between its blocks (block means 100.2, 104.2, 104.2; p=")
