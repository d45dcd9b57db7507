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
        (5.0, (-1.0, 11.0), True, "inconclusive"),  # includes zero but not inside the margin: no claim
        (-2.0, (-3.0, -1.0), True, "parity"),  # exactly at the threshold
        (50.0, None, True, "inconclusive"),  # a single repetition a side: no interval, no claim
        (-50.0, None, False, "inconclusive"),
        (float("nan"), (float("nan"), float("nan")), True, "inconclusive"),  # never parity from NaN
        (5.0, (1.0, float("inf")), True, "inconclusive"),
    ],
)
def test_verdict(delta, ci, higher, expected):
    assert stats.verdict(delta, ci, 2.0, higher, margin_pct=5.0) == expected


SEED = {  # the seed PR's table: (native mean, std, AFD mean, std, higher is better), n = 5 a side
    "request_throughput": (2.4047, 0.0195, 2.4295, 0.0092, True),
    "output_throughput": (307.80, 2.50, 310.98, 1.18, True),
    "mean_ttft_ms": (371.29, 13.39, 404.24, 6.16, False),
    "mean_tpot_ms": (100.13, 0.78, 98.88, 0.38, False),
    "mean_itl_ms": (100.13, 0.78, 98.88, 0.38, False),
    "mean_e2el_ms": (13088.36, 109.82, 12962.50, 49.08, False),
}


# The worked example of docs/performance-verdicts.md: verdict, delta, 95% and 90% intervals (in % of native).
SEED_JUDGED = {
    "request_throughput": ("parity", 1.03, (0.04, 2.03), (0.24, 1.82)),
    "output_throughput": ("parity", 1.03, (0.04, 2.03), (0.25, 1.82)),
    "mean_ttft_ms": ("worse", 8.87, (4.46, 13.29), (5.38, 12.37)),
    "mean_tpot_ms": ("parity", -1.25, (-2.20, -0.29), (-2.01, -0.49)),
    "mean_itl_ms": ("parity", -1.25, (-2.20, -0.29), (-2.01, -0.49)),
    "mean_e2el_ms": ("parity", -0.96, (-1.99, 0.06), (-1.77, -0.15)),
}


def test_seed_table_judged_from_its_summary_statistics_at_the_default_margins():
    """n = 5 a side, threshold 2%, margins 3% (throughput) and 5% (latency): the docs' worked example."""
    for key, (bm, bs, cm, cs, higher) in SEED.items():
        judged = stats.judge(
            stats.Summary(bm, bs, 5),
            stats.Summary(cm, cs, 5),
            threshold_pct=2.0,
            margin_pct=3.0 if higher else 5.0,
            higher_is_better=higher,
        )
        verdict, delta, ci95, ci90 = SEED_JUDGED[key]
        assert str(judged.verdict) == verdict, key
        assert round(judged.delta_pct, 2) == delta, key
        assert tuple(round(b, 2) for b in judged.ci95_pct) == ci95, key
        assert tuple(round(b, 2) for b in judged.ci90_pct) == ci90, key


def _judge(base, cand, looks=1):
    return stats.judge(
        stats.Summary.of(base),
        stats.Summary.of(cand),
        threshold_pct=2.0,
        margin_pct=3.0,
        higher_is_better=False,
        looks=looks,
    )


def test_equal_distributions_with_enough_repetitions_are_parity():
    base = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8]
    assert _judge(base, list(reversed(base))).verdict == "parity"


def test_a_20_percent_shift_is_worse_and_better():
    base = [100.0, 101.0, 99.0, 100.5]
    slow = [v * 1.2 for v in base]
    assert _judge(base, slow).verdict == "worse"
    assert _judge(slow, base).verdict == "better"


def test_two_repetitions_with_10_percent_noise_are_inconclusive_with_a_repetition_estimate():
    judged = _judge([90.0, 110.0], [91.0, 109.0])
    assert judged.verdict == "inconclusive" and judged.needed is not None and judged.needed > 2
    assert "is wider than the ±3% margin: about" in judged.reason
    assert f"about {judged.needed} repetitions per side" in judged.reason


def test_noise_cv_warmup_and_mad_outlier():
    found = stats.noise([12.0, 10.0, 10.2, 9.9, 10.1, 10.0])
    assert found.outliers == [1] and found.warmup_pct == pytest.approx(19.52, abs=0.01)
    assert found.cv_pct == pytest.approx(7.78, abs=0.01)
    assert stats.noise([10.0, 10.0, 10.0, 11.0]).outliers == []  # MAD 0: nothing flagged


def test_quick_verdict_is_judges_verdict_at_every_share_of_the_error_rates():
    """The p-value verdict a series asks at every look agrees with the interval verdict ``judge`` reports."""
    import random

    rng = random.Random(5)
    for trial in range(40):
        n_base, n_cand = rng.randint(2, 8), rng.randint(2, 8)
        shift, noise = rng.choice([0.0, 2.0, 6.0, 20.0]), rng.choice([0.5, 3.0, 10.0])
        base = stats.Summary.of([rng.gauss(100.0, noise) for _ in range(n_base)])
        cand = stats.Summary.of([rng.gauss(100.0 + shift, noise) for _ in range(n_cand)])
        settings = dict(threshold_pct=rng.choice([0.0, 2.0]), margin_pct=rng.choice([3.0, 5.0]), looks=trial % 6 + 1)
        for higher_is_better in (True, False):
            judged = stats.judge(base, cand, higher_is_better=higher_is_better, **settings)
            assert stats.quick_verdict(base, cand, higher_is_better=higher_is_better, **settings) is judged.verdict
