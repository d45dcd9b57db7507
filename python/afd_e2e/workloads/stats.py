"""Statistics for repetitions: mean, sample std, relative delta, Welch's 95% interval, and a noise-aware verdict.

Pure standard library (no SciPy on agents): Student's t quantile comes from the regularised incomplete beta
function (continued fraction, as in Numerical Recipes) inverted by bisection.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from afd_e2e.results.status import Verdict

CONFIDENCE = 0.95


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def sample_std(values: Sequence[float]) -> float:
    """Standard deviation with n - 1 in the denominator; 0 for a single value."""
    if len(values) < 2:
        return 0.0
    m = mean(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / (len(values) - 1))


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, 1.0 - x) / b


def student_t_cdf(t: float, df: float) -> float:
    tail = 0.5 * regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def student_t_quantile(p: float, df: float) -> float:
    """The t with ``cdf(t) == p`` for ``0.5 <= p < 1`` (bisection to 1e-10)."""
    low, high = 0.0, 1.0
    while student_t_cdf(high, df) < p:
        high *= 2.0
    while high - low > 1e-10:
        middle = (low + high) / 2.0
        low, high = (middle, high) if student_t_cdf(middle, df) < p else (low, middle)
    return (low + high) / 2.0


def welch_interval(baseline: Sequence[float], candidate: Sequence[float]) -> tuple[float, float] | None:
    """95% interval for mean(candidate) - mean(baseline) under Welch's unequal-variance t; None below 2 values."""
    if len(baseline) < 2 or len(candidate) < 2:
        return None
    diff = mean(candidate) - mean(baseline)
    vb, vc = sample_std(baseline) ** 2 / len(baseline), sample_std(candidate) ** 2 / len(candidate)
    se = math.sqrt(vb + vc)
    if se == 0.0:
        return (diff, diff)
    df = (vb + vc) ** 2 / (vb**2 / (len(baseline) - 1) + vc**2 / (len(candidate) - 1))
    half = student_t_quantile(1.0 - (1.0 - CONFIDENCE) / 2.0, df) * se
    return (diff - half, diff + half)


def verdict(delta_pct: float, ci_pct: Sequence[float] | None, threshold_pct: float, higher_is_better: bool) -> Verdict:
    """``better``/``worse`` only when the change exceeds the threshold and its 95% interval excludes zero;
    ``parity`` otherwise. Without an interval (fewer than two repetitions on a side) or with a non-finite delta
    there is no claim: ``inconclusive``."""
    if ci_pct is None or not all(math.isfinite(v) for v in (delta_pct, *ci_pct)):
        return Verdict.INCONCLUSIVE
    significant = ci_pct[0] > 0.0 or ci_pct[1] < 0.0
    if abs(delta_pct) <= threshold_pct or not significant:
        return Verdict.PARITY
    return Verdict.BETTER if (delta_pct > 0) == higher_is_better else Verdict.WORSE
