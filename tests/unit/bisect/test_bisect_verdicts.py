"""Unit tier: a probed commit's word (``afd_e2e.bisect.verdicts``): the bad revision by the performance comparison's
own verdict against the good revision's values (worse: the regression reproduces; parity: none; inconclusive: run
again), a commit between them by its position on the regression (``bisect/position.py``, tested in
test_bisect_position.py), parity and GSM8K pass/fail; a run that measured nothing is skipped; a metric the case does
not measure is bad input."""

from __future__ import annotations

import copy

import pytest

from afd_e2e.bisect.verdicts import Ends, Sample, judge_commit, metric_spec
from afd_e2e.errors import UsageError
from afd_e2e.profile import load_profile
from afd_e2e.results.gsm8k_records import Gsm8kResult
from afd_e2e.results.parity_records import ParityOutput
from afd_e2e.results.status import BisectWord, Status, Verdict
from repo_paths import FIXTURES
from results_docs import load_fixture

PROFILE = load_profile("tiny-cpu")
BISECT_CPU = str(FIXTURES / "profiles" / "bisect-cpu.yaml")
TPOT = metric_spec(PROFILE, "cpu-tp1", "mean_tpot_ms")
REFERENCE = [Sample(Status.PASSED, values=[10.0, 10.05, 9.95, 10.02])]


SLOW = [Sample(Status.PASSED, values=[15.0, 15.1, 14.9, 15.05])]


def _judge(spec, samples, reference=REFERENCE, *, role="bad", bad=SLOW):
    return judge_commit(spec, PROFILE, Ends(reference, bad), samples, role=role, looks=3)


def test_the_bad_revision_takes_the_comparisons_verdict_and_margin() -> None:
    assert TPOT.gate is not None and TPOT.gate.margin_pct == 5.0 and TPOT.threshold_pct == 10.0
    same = _judge(TPOT, [Sample(Status.PASSED, values=[10.01, 9.98, 10.04, 9.99])])
    assert (same.word, same.verdict) == (BisectWord.GOOD, Verdict.PARITY), "no regression to hunt"
    slow = _judge(TPOT, SLOW)
    assert (slow.word, slow.verdict) == (BisectWord.BAD, Verdict.WORSE) and slow.delta_pct == pytest.approx(50.0, 0.01)
    noisy = _judge(TPOT, [Sample(Status.PASSED, values=[6.0, 14.0, 8.0, 13.0])])
    assert noisy.word is None and noisy.verdict is Verdict.INCONCLUSIVE and noisy.add_ends == ()
    assert "is wider than the ±5% margin" in noisy.reason and "repetitions per side" in noisy.reason


def test_the_move_hunted_sets_how_far_the_bad_revision_must_move() -> None:
    """``--regression-pct`` (the trend's move): half of it is the least the bad revision must be worse by, below the
    profile's 10% threshold too, and a bad revision whose interval stays short of half of it is not that regression."""
    plus_six = [Sample(Status.PASSED, values=[10.6, 10.61, 10.59, 10.6])]
    assert _judge(TPOT, plus_six).word is None, "+6% is under the profile's 10% threshold"
    hunting_eight = metric_spec(PROFILE, "cpu-tp1", "mean_tpot_ms", hunted_pct=8.0)
    assert hunting_eight.endpoint_threshold_pct == 4.0
    assert _judge(hunting_eight, plus_six).word is BisectWord.BAD
    hunting_forty = metric_spec(PROFILE, "cpu-tp1", "mean_tpot_ms", hunted_pct=40.0)
    plus_twelve = [Sample(Status.PASSED, values=[11.2, 11.21, 11.19, 11.2])]
    short = _judge(hunting_forty, plus_twelve)
    assert short.word is BisectWord.GOOD and short.verdict is Verdict.WORSE
    assert short.reason.endswith("short of half the 40.0% move hunted: that regression does not reproduce here")
    with pytest.raises(UsageError, match="a correctness outcome is pass/fail"):
        metric_spec(PROFILE, "cpu-tp1", "parity", hunted_pct=5.0)


def test_a_bad_revision_undecided_by_the_good_ones_spread_asks_for_a_good_run() -> None:
    noisy_good = [Sample(Status.PASSED, values=[6.0, 14.0, 8.0, 13.0])]
    judged = _judge(TPOT, [Sample(Status.PASSED, values=[13.0, 13.1, 12.9, 13.0])], noisy_good)
    assert judged.word is None and judged.add_ends == ("good",)


def test_a_commit_between_is_placed_on_the_regression_not_judged_by_the_margin() -> None:
    near_good = _judge(TPOT, [Sample(Status.PASSED, values=[10.6, 10.7, 10.65, 10.62])], role="between")
    assert near_good.word is BisectWord.GOOD and near_good.verdict is None
    assert near_good.position == pytest.approx(0.13, abs=0.01) and near_good.delta_pct == pytest.approx(6.4, abs=0.1)
    near_bad = _judge(TPOT, [Sample(Status.PASSED, values=[14.2, 14.4, 14.3, 14.1])], role="between")
    assert near_bad.word is BisectWord.BAD and near_bad.position_ci90 and near_bad.position_ci90[0] > 0.5


def test_the_good_revision_is_the_reference_once_it_has_two_values() -> None:
    assert _judge(TPOT, REFERENCE, [], role="good").word is BisectWord.GOOD
    assert _judge(TPOT, [Sample(Status.PASSED, values=[10.0])], [], role="good").word is None


def test_a_run_that_measured_nothing_is_skipped_and_a_cancelled_one_says_nothing() -> None:
    failed = _judge(TPOT, [Sample(Status.FAILED, "server did not become ready within 300 s")])
    assert failed.word is BisectWord.SKIPPED and failed.reason == "skipped: server did not become ready within 300 s"
    assert _judge(TPOT, [Sample(Status.CANCELLED)]).word is None


def _outputs(*, broken: bool = False) -> list[ParityOutput]:
    raw = copy.deepcopy(load_fixture("tiny-cpu")["cases"]["cpu-tp1"]["parity_outputs"])
    outputs = [ParityOutput(**o) for o in raw]
    if broken:
        for o in outputs:
            o.token_ids = [0] * len(o.token_ids or [])
            o.top_logprobs = [{"0": 0.0} for _ in o.top_logprobs or []]
    return outputs


def test_parity_is_pass_fail_against_the_good_revisions_outputs() -> None:
    spec = metric_spec(PROFILE, "cpu-tp1", "parity")
    reference = [Sample(Status.PASSED, outputs=_outputs())]
    assert _judge(spec, reference, [], role="good").word is BisectWord.GOOD
    same = _judge(spec, [Sample(Status.PASSED, outputs=_outputs())], reference, role="between")
    assert same.word is BisectWord.GOOD and same.values == [3.0]
    broken = _judge(spec, [Sample(Status.PASSED, outputs=_outputs(broken=True))], reference, role="between")
    assert (
        broken.word is BisectWord.BAD
        and broken.reason.startswith("parity: 3/3 prompts differ")
        and broken.values == [0.0]
    )


def test_gsm8k_is_the_cases_strict_match_gate() -> None:
    profile = load_profile("qwen3.5-122b-a10b")
    case = profile.cases[0].id
    spec = metric_spec(profile, case, "gsm8k")

    def sample(correct: int, status: Status) -> Sample:
        return Sample(Status.PASSED, gsm8k=Gsm8kResult(status, correct, 50, 45, True, correct, "gsm8k/x.jsonl"))

    assert (
        judge_commit(spec, profile, Ends(), [sample(48, Status.PASSED)], role="between", looks=3).word
        is BisectWord.GOOD
    )
    bad = judge_commit(spec, profile, Ends(), [sample(30, Status.FAILED)], role="good", looks=3)
    assert bad.word is BisectWord.BAD and bad.reason == "GSM8K strict-match 30/50 (needs 45)"


@pytest.mark.parametrize(
    ("profile", "case", "metric", "said"),
    [
        ("tiny-cpu", "cpu-tp1", "tpot", "--metric 'tpot' is neither a bench metric nor a correctness outcome"),
        (BISECT_CPU, "cpu-tp1", "gsm8k", "--metric gsm8k: case cpu-tp1 of profile bisect-cpu does not measure it"),
        ("tiny-cpu", "cpu-tp9", "parity", "profile tiny-cpu has no case 'cpu-tp9'"),
    ],
)
def test_a_metric_the_case_does_not_measure_is_bad_input(profile: str, case: str, metric: str, said: str) -> None:
    with pytest.raises(UsageError) as raised:
        metric_spec(load_profile(profile), case, metric)
    assert raised.value.problem == said and raised.value.fix
