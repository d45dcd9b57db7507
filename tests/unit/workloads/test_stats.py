"""Repetition statistics: sample std, Student's t quantiles, Welch's interval, noise-aware verdicts."""

from __future__ import annotations

import math

import pytest

from afd_e2e.workloads import stats


def test_mean_and_sample_std():
    assert stats.mean([1.0, 2.0, 3.0, 4.0]) == 2.5
    assert stats.sample_std([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) == pytest.approx(2.138089935)
    assert stats.sample_std([3.0]) == 0.0


@pytest.mark.parametrize(
    ("df", "t975"),
    # Published two-sided 95% critical values of Student's t.
    [(1, 12.7062047), (2, 4.3026527), (4, 2.7764451), (8, 2.3060041), (30, 2.0422725), (1e6, 1.9599664)],
)
def test_student_t_quantile_matches_tables(df, t975):
    assert stats.student_t_quantile(0.975, df) == pytest.approx(t975, abs=1e-6)


def test_student_t_cdf_is_symmetric_and_fractional_df_lies_between():
    assert stats.student_t_cdf(0.0, 5) == pytest.approx(0.5)
    assert stats.student_t_cdf(-1.3, 5) == pytest.approx(1 - stats.student_t_cdf(1.3, 5))
    assert (
        stats.student_t_quantile(0.975, 5) > stats.student_t_quantile(0.975, 5.5) > stats.student_t_quantile(0.975, 6)
    )


def test_welch_interval_by_hand():
    base, cand = [10.0, 12.0, 11.0, 13.0], [14.0, 15.0, 13.0, 16.0, 17.0]
    vb, vc = stats.sample_std(base) ** 2 / 4, stats.sample_std(cand) ** 2 / 5
    df = (vb + vc) ** 2 / (vb**2 / 3 + vc**2 / 4)
    half = stats.student_t_quantile(0.975, df) * math.sqrt(vb + vc)
    low, high = stats.welch_interval(base, cand)
    assert (low, high) == pytest.approx((3.5 - half, 3.5 + half))
    assert 0 < low < 3.5 < high


def test_welch_interval_edge_cases():
    assert stats.welch_interval([1.0], [2.0, 3.0]) is None
    assert stats.welch_interval([2.0, 2.0], [3.0, 3.0]) == (1.0, 1.0)


@pytest.mark.parametrize(
    ("delta", "ci", "higher", "expected"),
    [
        (8.87, (4.46, 13.29), False, "worse"),  # the seed's TTFT
        (8.87, (4.46, 13.29), True, "better"),
        (-5.0, (-9.0, -1.0), False, "better"),
        (1.03, (0.04, 2.03), True, "parity"),  # within the threshold though significant
        (5.0, (-1.0, 11.0), True, "parity"),  # beyond the threshold but within noise
        (-2.0, (-3.0, -1.0), True, "parity"),  # exactly at the threshold
        (50.0, None, True, "inconclusive"),  # a single repetition a side: no interval, no claim
        (-50.0, None, False, "inconclusive"),
        (float("nan"), (float("nan"), float("nan")), True, "inconclusive"),  # never parity from NaN
        (5.0, (1.0, float("inf")), True, "inconclusive"),
    ],
)
def test_verdict(delta, ci, higher, expected):
    assert stats.verdict(delta, ci, 2.0, higher) == expected
