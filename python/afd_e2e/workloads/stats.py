"""Statistics for repetitions: mean, sample std, Welch's intervals, the four performance verdicts, the repetitions
a verdict would need, and each side's noise.

A verdict says what the data support, never what they fail to refute:
- ``better``/``worse``: the delta's two-sided 95% Welch interval lies wholly beyond zero and the delta is beyond
  the metric's threshold;
- ``parity``: equivalence by two one-sided tests at 5% each (TOST, Schuirmann 1987), i.e. the delta's 90% interval
  lies wholly inside ±margin;
- ``inconclusive``: neither, with a sentence saying the interval, the margin and about how many repetitions per side
  would decide it at the observed noise.
Where the same pair is looked at repeatedly (repetitions added until decided), each look spends an equal share of
both error rates (Bonferroni over the planned looks, ``looks``): the chance of a false ``worse`` over all looks stays
at or under the single-look 2.5% one-sided (and of a false ``parity`` under 5%), whatever the data do between looks.
Bonferroni rather than an O'Brien-Fleming or Pocock boundary because it needs no joint distribution of the looks
(Welch's degrees of freedom change at every look, and a look may add repetitions to one side only) and is exact in
its guarantee, at the price of being conservative.

What a comparison could have seen is stated beside what it saw: the **smallest detectable change** is the
difference (in % of the baseline) that its repetitions, at the observed noise and this look's share of the error
rate, would call ``better``/``worse`` with 80% power: ``(t[1 - alpha/2] + t[power]) x SE``, the textbook
two-sample power relation with Welch's standard error and degrees of freedom, and never under the metric's
threshold (a smaller delta is not called different whatever the noise).

Pure standard library (no SciPy on agents): Student's t quantile comes from the regularised incomplete beta
function (continued fraction, as in Numerical Recipes) inverted by bisection.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from afd_e2e.results.status import Verdict

CONFIDENCE = 0.95  # the difference interval (better/worse): 2.5% one-sided false-worse rate
EQUIVALENCE_CONFIDENCE = 0.90  # TOST at 5% per side: parity when this interval lies inside ±margin
MAX_ESTIMATE = 1000  # repetitions per side beyond which the estimate reads "more than"
POWER = 0.80  # the smallest detectable change is the one a comparison would call different this often
OUTLIER_Z = 3.5  # modified z-score (Iglewicz & Hoaglin) beyond which one repetition is flagged


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


def f_test_p(groups: Sequence[Sequence[float]]) -> float | None:
    """The p-value of a one-way analysis of variance (do the groups' means differ beyond the spread within
    them?), None where there is no spread within to judge by (every group a single value)."""
    groups = [list(g) for g in groups if g]
    total = sum(len(g) for g in groups)
    if len(groups) < 2 or total <= len(groups):
        return None
    grand = mean([v for g in groups for v in g])
    between = sum(len(g) * (mean(g) - grand) ** 2 for g in groups)
    within = sum((v - mean(g)) ** 2 for g in groups for v in g)
    d1, d2 = len(groups) - 1, total - len(groups)
    if within == 0:
        return 0.0 if between > 0 else 1.0
    f = (between / d1) / (within / d2)
    return 1.0 - regularized_incomplete_beta(d1 / 2, d2 / 2, d1 * f / (d1 * f + d2))


@dataclass(frozen=True)
class Summary:
    """One side's repetitions as mean, sample std and count: what a published table gives (the seed's ``mean ± std``,
    n = 5) and all the verdict needs."""

    mean: float
    std: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        return cls(mean(values), sample_std(values), len(values))


def _welch(base: Summary, cand: Summary) -> tuple[float, float]:
    """Standard error of mean(candidate) - mean(baseline), and Welch-Satterthwaite degrees of freedom."""
    vb, vc = base.std**2 / base.n, cand.std**2 / cand.n
    se = math.sqrt(vb + vc)
    if se == 0.0:
        return 0.0, math.inf
    return se, (vb + vc) ** 2 / (vb**2 / (base.n - 1) + vc**2 / (cand.n - 1))


def _interval(diff: float, se: float, df: float, confidence: float) -> tuple[float, float]:
    if se == 0.0:
        return (diff, diff)
    half = student_t_quantile(1.0 - (1.0 - confidence) / 2.0, df) * se
    return (diff - half, diff + half)


def welch_interval(
    baseline: Sequence[float], candidate: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """Interval for mean(candidate) - mean(baseline) under Welch's unequal-variance t; None below 2 values."""
    if len(baseline) < 2 or len(candidate) < 2:
        return None
    base, cand = Summary.of(baseline), Summary.of(candidate)
    return _interval(cand.mean - base.mean, *_welch(base, cand), confidence)


def verdict(
    delta_pct: float,
    ci_pct: Sequence[float] | None,
    threshold_pct: float,
    higher_is_better: bool,
    *,
    margin_pct: float,
    equivalence_ci_pct: Sequence[float] | None = None,
) -> Verdict:
    """The verdict from intervals already in % of the baseline: ``better``/``worse`` when ``ci_pct`` excludes zero
    and the delta exceeds the threshold; ``parity`` when ``equivalence_ci_pct`` (default: ``ci_pct`` itself, the
    stricter choice for a caller without a 90% interval) lies inside ±margin; ``inconclusive`` otherwise, and
    always without an interval or with a non-finite figure (never parity from NaN)."""
    equivalence = ci_pct if equivalence_ci_pct is None else equivalence_ci_pct
    if ci_pct is None or equivalence is None:
        return Verdict.INCONCLUSIVE
    if not all(math.isfinite(v) for v in (delta_pct, *ci_pct, *equivalence)):
        return Verdict.INCONCLUSIVE
    if (ci_pct[0] > 0.0 or ci_pct[1] < 0.0) and abs(delta_pct) > threshold_pct:
        return Verdict.BETTER if (delta_pct > 0) == higher_is_better else Verdict.WORSE
    if -margin_pct < equivalence[0] and equivalence[1] < margin_pct:
        return Verdict.PARITY
    return Verdict.INCONCLUSIVE


@dataclass(frozen=True)
class Judgement:
    """One metric judged: delta, both intervals (all in % of the baseline mean, at this look's share of the error
    rates), the verdict, and for ``inconclusive`` the reason and the repetitions per side that would decide it."""

    verdict: Verdict
    delta_pct: float | None = None
    ci95_pct: list[float] | None = None  # the difference interval (95% on a single look)
    ci90_pct: list[float] | None = None  # the equivalence interval (90% on a single look)
    needed: int | None = None  # repetitions per side that would decide it at the observed noise
    reason: str = ""


def _needed(
    delta_pct: float, base: Summary, cand: Summary, threshold_pct: float, margin_pct: float, looks: int
) -> int | None:
    """The fewest repetitions per side (both sides n, at this look's share of the error rates) at which the observed
    delta and standard deviations would reach a verdict: parity when |delta| < margin, a difference when |delta| >
    threshold; None when neither can be reached (the delta sits between margin and threshold) or beyond
    ``MAX_ESTIMATE``."""
    var = (base.std**2 + cand.std**2) / base.mean**2 * 1e4  # in %^2
    if var == 0.0:
        return 2
    weight = (base.std**4 + cand.std**4) / base.mean**4 * 1e8
    goals = []
    if abs(delta_pct) < margin_pct:
        goals.append((margin_pct - abs(delta_pct), 1.0 - (1.0 - EQUIVALENCE_CONFIDENCE) / looks))
    if abs(delta_pct) > threshold_pct:
        goals.append((abs(delta_pct), 1.0 - (1.0 - CONFIDENCE) / looks))
    best = None
    for room, confidence in goals:
        n = 2
        while n <= MAX_ESTIMATE:
            df = (n - 1) * var**2 / weight if weight > 0 else math.inf
            t = student_t_quantile(1.0 - (1.0 - confidence) / 2.0, df)
            if t * math.sqrt(var / n) < room:
                break
            n = n + 1 if n < 20 else int(n * 1.1) + 1
        if n <= MAX_ESTIMATE:
            best = n if best is None else min(best, n)
    return best


def _sentence(
    delta_pct: float, ci90_pct: Sequence[float], needed: int | None, margin_pct: float, threshold_pct: float
) -> str:
    """Why an inconclusive metric is: "interval [-9.1%, +4.2%] is wider than the ±3% margin: about 12 repetitions
    per side would decide it at this noise"."""
    low, high = ci90_pct
    shown = f"interval [{low:+.1f}%, {high:+.1f}%]"
    if margin_pct <= abs(delta_pct) <= threshold_pct:
        return (
            f"{shown}: the delta {delta_pct:+.1f}% lies between the ±{margin_pct:g}% margin and the "
            f"{threshold_pct:g}% threshold, so no number of repetitions decides it (set margin_pct >= threshold)"
        )
    what = "is wider than" if high - low >= 2 * margin_pct else "is not inside"
    if needed is None:
        more = f"more than {MAX_ESTIMATE} repetitions per side would be needed at this noise"
    else:
        more = f"about {needed} repetitions per side would decide it at this noise"
    return f"{shown} {what} the ±{margin_pct:g}% margin: {more}"


def judge(
    base: Summary,
    cand: Summary,
    *,
    threshold_pct: float,
    margin_pct: float,
    higher_is_better: bool,
    looks: int = 1,
) -> Judgement:
    """The verdict on one metric from the two sides' summaries (the entry point for published ``mean ± std`` tables
    too); ``looks``: the planned looks of a sequential comparison, over which both error rates are split."""
    if base.n < 1 or cand.n < 1 or not base.mean > 0.0 or not math.isfinite(cand.mean):
        return Judgement(Verdict.INCONCLUSIVE, reason="no finite delta: the baseline mean is not positive")
    delta_pct = (cand.mean - base.mean) / base.mean * 100.0
    if base.n < 2 or cand.n < 2:
        return Judgement(
            Verdict.INCONCLUSIVE, delta_pct, reason="fewer than two repetitions on a side: no interval, no claim"
        )
    se, df = _welch(base, cand)
    diff, scale = cand.mean - base.mean, 100.0 / base.mean
    ci95 = [b * scale for b in _interval(diff, se, df, 1.0 - (1.0 - CONFIDENCE) / looks)]
    ci90 = [b * scale for b in _interval(diff, se, df, 1.0 - (1.0 - EQUIVALENCE_CONFIDENCE) / looks)]
    found = verdict(delta_pct, ci95, threshold_pct, higher_is_better, margin_pct=margin_pct, equivalence_ci_pct=ci90)
    judgement = Judgement(found, delta_pct, ci95, ci90)
    if found is not Verdict.INCONCLUSIVE:
        return judgement
    needed = _needed(delta_pct, base, cand, threshold_pct, margin_pct, looks)
    reason = _sentence(delta_pct, ci90, needed, margin_pct, threshold_pct)
    return Judgement(found, delta_pct, ci95, ci90, needed, reason)


def detectable_pct(base: Summary, cand: Summary, *, threshold_pct: float, looks: int = 1) -> float | None:
    """The smallest change, in % of the baseline mean, these repetitions would call different with ``POWER``: None
    below two repetitions a side or without a positive baseline mean."""
    if base.n < 2 or cand.n < 2 or not base.mean > 0.0:
        return None
    se, df = _welch(base, cand)
    alpha = (1.0 - CONFIDENCE) / looks
    reach = (student_t_quantile(1.0 - alpha / 2.0, df) + student_t_quantile(POWER, df)) * se / base.mean * 100.0
    return max(reach, threshold_pct)


def repetitions_to_detect(
    base: Summary, cand: Summary, detect_pct: float, *, threshold_pct: float, looks: int = 1
) -> int | None:
    """The fewest repetitions per side (both sides n, at the observed standard deviations) whose detectable change
    is at most ``detect_pct``; None where none can be: the threshold is above it, or beyond ``MAX_ESTIMATE``."""
    if threshold_pct > detect_pct or not base.mean > 0.0:
        return None
    n = 2
    while n <= MAX_ESTIMATE:
        reach = detectable_pct(
            Summary(base.mean, base.std, n), Summary(cand.mean, cand.std, n), threshold_pct=threshold_pct, looks=looks
        )
        if reach is not None and reach <= detect_pct:
            return n
        n = n + 1 if n < 20 else int(n * 1.1) + 1
    return None


def quick_verdict(
    base: Summary, cand: Summary, *, threshold_pct: float, margin_pct: float, higher_is_better: bool, looks: int
) -> Verdict:
    """``judge``'s verdict from p-values (three t CDFs, no quantile search): the interval excludes zero exactly when
    the two-sided p-value is under its alpha, and lies inside ±margin exactly when both one-sided p-values are. What
    a sequential series asks at every look and what the simulation in the tests asks thousands of times."""
    if base.n < 2 or cand.n < 2 or not base.mean > 0.0 or not math.isfinite(cand.mean):
        return Verdict.INCONCLUSIVE
    se, df = _welch(base, cand)
    diff, scale = cand.mean - base.mean, 100.0 / base.mean
    delta_pct = diff * scale
    beyond = abs(delta_pct) > threshold_pct
    if se == 0.0:  # no noise at all: the delta itself decides
        differs, equivalent = beyond and diff != 0.0, abs(delta_pct) < margin_pct
    else:
        alpha_diff, alpha_eq = (1.0 - CONFIDENCE) / looks, (1.0 - EQUIVALENCE_CONFIDENCE) / looks
        differs = beyond and 2.0 * (1.0 - student_t_cdf(abs(diff) / se, df)) < alpha_diff
        margin = margin_pct / scale
        equivalent = not differs and (
            1.0 - student_t_cdf((diff + margin) / se, df) < alpha_eq / 2.0
            and student_t_cdf((diff - margin) / se, df) < alpha_eq / 2.0
        )
    if differs:
        return Verdict.BETTER if (delta_pct > 0) == higher_is_better else Verdict.WORSE
    return Verdict.PARITY if equivalent else Verdict.INCONCLUSIVE


@dataclass(frozen=True)
class Noise:
    """One side's noise: coefficient of variation, the warm-up effect (first measured repetition against the mean of
    the rest, needs three), and the repetitions (1-based) a robust rule calls outliers."""

    cv_pct: float | None
    warmup_pct: float | None
    outliers: list[int] = field(default_factory=list)


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2.0


def noise(values: Sequence[float]) -> Noise:
    """CV = std / mean; outliers by the modified z-score 0.6745 |x - median| / MAD > 3.5 (Iglewicz & Hoaglin): the
    median absolute deviation is not moved by the outlier itself, as a std would be. With MAD 0 (most values equal)
    nothing is flagged: a rule that flags every other value would say nothing."""
    m = mean(values) if values else 0.0
    cv = sample_std(values) / m * 100.0 if len(values) >= 2 and m > 0 else None
    rest = values[1:]
    warmup = (values[0] - mean(rest)) / mean(rest) * 100.0 if len(values) >= 3 and mean(rest) > 0 else None
    outliers: list[int] = []
    if len(values) >= 3:
        center = median(values)
        mad = median([abs(v - center) for v in values])
        if mad > 0:
            outliers = [i for i, v in enumerate(values, 1) if 0.6745 * abs(v - center) / mad > OUTLIER_Z]
    return Noise(cv, warmup, outliers)
