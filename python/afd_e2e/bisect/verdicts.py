"""Good or bad for one probed commit, from its runs' samples and the endpoints' (pure).

A bench metric (``mean_tpot_ms``, ...) is judged by the regression the bisect hunts. The bad revision is judged
first, against the good one, with the performance comparison's own verdict (``workloads.stats.judge``: ``worse`` is
the regression reproduced, ``parity`` or ``better`` means there is none to hunt). Every commit between them is
placed between the endpoints (``bisect/position.py``): bad when it is closer to the bad revision than to the good
one with confidence, good in the mirror case, undecided (run again) otherwise; the profile's equivalence margin plays
no part, since a commit need not equal the good revision to lack the regression. Both rules split their error
rates over the planned runs per commit (``looks``): each added run is another look at the same commit. An undecided
judgement names the endpoints whose spread weighs as much as the commit's own (``add_ends``), so the search adds
their runs too. A correctness metric is pass/fail: ``gsm8k`` the case's strict-match gate, ``parity`` every parity
prompt identical or close to the good revision's output (the comparison's rule, ``workloads.parity.compare_outputs``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from afd_e2e.bisect.position import BAD_END, GOOD_END, locate
from afd_e2e.errors import UsageError
from afd_e2e.profile import Profile
from afd_e2e.profile.bench_spec import BENCH_METRICS, DEFAULT_MARGIN_PCT, MetricGate, bench_spec
from afd_e2e.results.gsm8k_records import Gsm8kResult
from afd_e2e.results.parity_records import ParityOutput
from afd_e2e.results.status import BisectWord, Status, Verdict
from afd_e2e.workloads import stats
from afd_e2e.workloads.parity import compare_outputs, parity_spec

GSM8K = "gsm8k"
PARITY = "parity"
CORRECTNESS_METRICS = (GSM8K, PARITY)
Role = Literal["good", "bad", "between"]  # the good revision, the bad one, a commit between them


@dataclass(frozen=True)
class Sample:
    """What one run of the case measured: its status, the bench values of the metric (passed repetitions), its
    parity outputs and GSM8K section (None where the case recorded none)."""

    status: Status
    failure: str | None = None
    values: list[float] = field(default_factory=list)
    outputs: list[ParityOutput] | None = None
    gsm8k: Gsm8kResult | None = None


@dataclass(frozen=True)
class Judged:
    """A commit's word (None: undecided, run again), the sentence why, and a bench metric's verdict figures."""

    word: BisectWord | None
    reason: str
    verdict: Verdict | None = None
    delta_pct: float | None = None
    ci95_pct: list[float] | None = None
    ci90_pct: list[float] | None = None
    values: list[float] = field(default_factory=list)  # what the plot and table show: bench values, GSM8K
    # correct answers per run, parity prompts matching the good revision's outputs
    position: float | None = None  # a bench metric's commit between the endpoints: 0 good, 1 bad
    position_ci90: list[float] | None = None
    add_ends: tuple[str, ...] = ()  # undecided: the endpoints whose added runs would narrow it ("good", "bad")


@dataclass(frozen=True)
class Ends:
    """The endpoints' samples so far: the good revision's (the reference) and the bad one's."""

    good: Sequence[Sample] = ()
    bad: Sequence[Sample] = ()


@dataclass(frozen=True)
class MetricSpec:
    """The metric a bisect judges: a bench gate (key, direction, margin) with the comparison's threshold, or a
    correctness outcome (``gsm8k`` / ``parity``)."""

    key: str
    gate: MetricGate | None = None
    threshold_pct: float = 0.0
    hunted_pct: float | None = None  # the size of the move hunted (the trend's), % of the good revision, unsigned

    @property
    def endpoint_threshold_pct(self) -> float:
        """The least delta the bad revision must show: the comparison's threshold, or half the move hunted where
        that is smaller (a +5% move the trend saw is bisectable under a 10% threshold)."""
        if self.hunted_pct is None:
            return self.threshold_pct
        return min(self.threshold_pct, self.hunted_pct / 2.0)

    @property
    def bench(self) -> bool:
        return self.gate is not None


def metric_spec(profile: Profile, case_id: str, key: str, hunted_pct: float | None = None) -> MetricSpec:
    """The metric ``--metric`` names, checked against what the profile's case measures (UsageError otherwise);
    ``hunted_pct``: the size of the move to hunt (``--regression-pct``), a bench metric's only."""
    if hunted_pct is not None and not hunted_pct > 0.0:
        raise UsageError(f"--regression-pct {hunted_pct:g} is not above 0", "pass the move's size, e.g. 8 for +8%")
    phases = profile.case(case_id).phases
    if key in CORRECTNESS_METRICS:
        if "correctness" not in phases or key not in profile.workloads:  # named after the section it judges
            section = f"workloads.{key}"
            raise UsageError(
                f"--metric {key}: case {case_id} of profile {profile.name} does not measure it",
                f"give the profile {section} and the case the correctness phase, or pick a bench metric",
            )
        if hunted_pct is not None:
            raise UsageError(
                f"--regression-pct with --metric {key}: a correctness outcome is pass/fail, it has no size",
                "drop --regression-pct, or bisect a bench metric",
            )
        return MetricSpec(key)
    known = {m.key: m for m in BENCH_METRICS}
    if key not in known:
        raise UsageError(
            f"--metric {key!r} is neither a bench metric nor a correctness outcome",
            f"use one of: {', '.join([*known, *CORRECTNESS_METRICS])}",
        )
    spec = bench_spec(profile)
    if spec is None or "performance" not in phases:
        raise UsageError(
            f"--metric {key}: case {case_id} of profile {profile.name} runs no performance phase",
            "pick a case with the performance phase, or a correctness metric (gsm8k, parity)",
        )
    gates = {g.metric.key: g for g in spec.metrics}
    metric = known[key]
    default = DEFAULT_MARGIN_PCT["throughput" if metric.higher_is_better else "latency"]
    gate = gates.get(key) or MetricGate(metric, "warn", default)
    return MetricSpec(key, gate, spec.parity_threshold_pct, hunted_pct)


def _pooled(samples: Sequence[Sample]) -> list[float]:
    return [v for s in samples for v in s.values]


def _against_good(spec: MetricSpec, reference: Sequence[Sample], samples: Sequence[Sample], looks: int) -> Judged:
    """The bad revision: does the regression reproduce (``worse`` against the good revision)?"""
    assert spec.gate is not None
    base, cand = _pooled(reference), _pooled(samples)
    if len(cand) < 2:
        return Judged(None, f"{len(cand)} passed repetitions of {spec.key}: fewer than two, run again", values=cand)
    good, bad = stats.Summary.of(base), stats.Summary.of(cand)
    judged = stats.judge(
        good,
        bad,
        threshold_pct=spec.endpoint_threshold_pct,
        margin_pct=spec.gate.margin_pct,
        higher_is_better=spec.gate.metric.higher_is_better,
        looks=looks,
    )
    word = {Verdict.WORSE: BisectWord.BAD, Verdict.INCONCLUSIVE: None}.get(judged.verdict, BisectWord.GOOD)
    reason = judged.reason or f"{spec.key} {judged.verdict}: {judged.delta_pct:+.1f}% against the good revision"
    if word is BisectWord.BAD and spec.hunted_pct is not None and judged.ci95_pct is not None:
        reach = max(abs(bound) for bound in judged.ci95_pct)  # the largest move the interval allows
        if reach < spec.hunted_pct / 2.0:
            low, high = judged.ci95_pct
            word = BisectWord.GOOD
            reason = (
                f"{spec.key} worse by {judged.delta_pct:+.1f}% (95% interval {low:+.1f}%..{high:+.1f}%), short of "
                f"half the {spec.hunted_pct:.1f}% move hunted: that regression does not reproduce here"
            )
    # the good revision's spread weighs as much as the bad one's: more runs of the bad one alone will not narrow it
    spread = good.std > 0.0 and good.std**2 / good.n >= bad.std**2 / bad.n
    add = (GOOD_END,) if word is None and spread else ()
    return Judged(word, reason, judged.verdict, judged.delta_pct, judged.ci95_pct, judged.ci90_pct, cand, add_ends=add)


def _between(spec: MetricSpec, ends: Ends, samples: Sequence[Sample], looks: int) -> Judged:
    """A commit between the endpoints: placed on the regression they show (``bisect/position.py``)."""
    good, bad, cand = _pooled(ends.good), _pooled(ends.bad), _pooled(samples)
    if len(cand) < 2:
        return Judged(None, f"{len(cand)} passed repetitions of {spec.key}: fewer than two, run again", values=cand)
    placed = locate(good, bad, cand, looks=looks)
    if placed is None:
        return Judged(None, "the endpoints' values do not place it (fewer than two, or equal means)", values=cand)
    delta_pct = (stats.mean(cand) - stats.mean(good)) / stats.mean(good) * 100.0 if stats.mean(good) else None
    return Judged(
        placed.word,
        placed.reason,
        delta_pct=delta_pct,
        values=cand,
        position=placed.position,
        position_ci90=list(placed.interval),
        add_ends=placed.ends_to_add(),
    )


def judge_commit(
    spec: MetricSpec,
    profile: Profile,
    ends: Ends,
    samples: Sequence[Sample],
    *,
    role: Role,
    looks: int,
) -> Judged:
    """The word for a commit from all its samples and the endpoints' (``ends``; the good revision itself is the
    reference, good by definition, once it has measured something)."""
    if not samples:
        return Judged(None, "not run yet")
    last = samples[-1]
    if spec.key == GSM8K:
        if last.gsm8k is None or last.gsm8k.status not in (Status.PASSED, Status.FAILED):
            return _unmeasured(last, "GSM8K")
        word = BisectWord.GOOD if last.gsm8k.status is Status.PASSED else BisectWord.BAD
        result = last.gsm8k
        corrects = [float(s.gsm8k.correct) for s in samples if s.gsm8k]
        return Judged(
            word, f"GSM8K strict-match {result.correct}/{result.total} (needs {result.min_correct})", values=corrects
        )
    if spec.key == PARITY:
        if not last.outputs:
            return _unmeasured(last, "parity outputs")
        if role == GOOD_END:
            shown = [float(len(last.outputs))]
            return Judged(BisectWord.GOOD, "the good revision: its outputs are the reference", values=shown)
        ref = next((s.outputs for s in ends.good if s.outputs), None)
        spec = parity_spec(profile)
        assert spec is not None and ref is not None
        compared = compare_outputs(spec, "good", ref, "probe", last.outputs)
        shown = [float(compared.identical + compared.close)]
        if compared.status is Status.PASSED:
            return Judged(BisectWord.GOOD, f"parity: {int(shown[0])}/{compared.total} prompts match", values=shown)
        if compared.different:
            return Judged(BisectWord.BAD, f"parity: {compared.failure}", values=shown)
        return Judged(None, f"parity not compared: {compared.failure}", values=shown)
    if not _pooled(samples):
        return _unmeasured(last, spec.key)
    if role == GOOD_END:
        values = _pooled(samples)
        if len(values) < 2:
            return Judged(None, "the good revision has fewer than two passed repetitions: run again")
        return Judged(BisectWord.GOOD, f"the good revision: {len(values)} repetitions are the reference", values=values)
    if role == BAD_END:
        return _against_good(spec, ends.good, samples, looks)
    return _between(spec, ends, samples, looks)


def _unmeasured(sample: Sample, what: str) -> Judged:
    """A run that measured nothing: a failed start is the commit's (``skipped``); a cancel is no word at all."""
    if sample.status.unfinished:
        return Judged(None, f"the run was {sample.status}")
    why = sample.failure or f"the run recorded no {what}"
    return Judged(BisectWord.SKIPPED, f"skipped: {why}")
