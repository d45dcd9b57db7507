"""The regression call on hand-picked series: what moves, what does not, and where it started."""

from __future__ import annotations

import pytest

from afd_e2e.trend.analysis import IMPROVEMENT, NO_HISTORY, NO_VALUE, REGRESSION, STEADY, band, call
from afd_e2e.trend.record import BuildRef, metric

NOISE = [100.0, 102.0, 99.0, 101.0, 98.0, 100.5, 101.5, 99.5, 100.0, 102.0]  # ±2%
TTFT = metric("mean_ttft_ms")  # lower is better
THROUGHPUT = metric("output_throughput")  # higher is better


def builds(values: list[float], first: int = 1) -> list[tuple[BuildRef, float]]:
    return [(BuildRef(f"#{first + i}", first + i, f"https://bk/{first + i}"), v) for i, v in enumerate(values)]


def tonight(value: float | None, number: int = 99) -> tuple[BuildRef, float | None]:
    return (BuildRef(f"#{number}", number), value)


def test_noise_within_the_spread_is_steady():
    result = call("c", TTFT, builds(NOISE), tonight(102.5), threshold_pct=1)
    assert result.status == STEADY
    assert result.started is None
    assert result.median == pytest.approx(100.25)
    assert result.change_pct == pytest.approx(2.244, abs=0.01)


def test_one_night_alone_however_far_is_no_change_and_two_are():
    assert call("c", TTFT, builds(NOISE), tonight(160.0), threshold_pct=1).status == STEADY
    result = call("c", TTFT, builds([*NOISE, 120.0]), tonight(121.0), threshold_pct=1)
    assert result.status == REGRESSION
    assert result.started.label == "#11"
    assert result.moved_nights == 2


def test_the_threshold_is_the_smallest_move_called():
    series = builds([*NOISE, 106.0])
    assert call("c", TTFT, series, tonight(106.0), threshold_pct=1).status == REGRESSION
    assert call("c", TTFT, series, tonight(106.0), threshold_pct=8).status == STEADY


def test_a_small_move_within_the_noise_is_steady():
    assert call("c", TTFT, builds([*NOISE, 101.5, 102.0]), tonight(101.0), threshold_pct=0).status == STEADY


def test_several_recent_nights_moving_together_name_the_first_of_them():
    series = [*NOISE, 125.0, 124.0, 126.0]
    result = call("c", TTFT, builds(series), tonight(125.5), threshold_pct=1)
    assert result.status == REGRESSION
    assert result.started.label == "#11"
    assert result.started.url == "https://bk/11"
    assert result.moved_nights == 4
    assert result.change_pct == pytest.approx(25.19, abs=0.1)  # against the median before the change


def test_a_spike_far_beyond_the_nights_after_it_is_not_where_their_change_started():
    """Two moved nights after a spike six times as far make a change of their own, named from the night after the
    spike (the old walk-back named the spike, opening an episode for one bad night); a first night merely higher
    than the rest still belongs to the change."""
    spiked = call("c", TTFT, builds([*NOISE, 140.0, 106.0]), tonight(106.5), threshold_pct=1)
    assert spiked.status == REGRESSION
    assert spiked.started.label == "#12"
    high_first = call("c", TTFT, builds([*NOISE, 110.0, 106.0]), tonight(106.5), threshold_pct=1)
    assert high_first.status == REGRESSION
    assert high_first.started.number <= 11


def test_an_old_outlier_in_the_history_neither_flags_tonight_nor_starts_a_change():
    series = [*NOISE[:3], 180.0, *NOISE[3:]]
    assert call("c", TTFT, builds(series), tonight(100.0), threshold_pct=1).status == STEADY


def test_a_change_that_came_back_is_not_a_change_point():
    series = [*NOISE, 125.0, 124.0]
    result = call("c", TTFT, builds(series), tonight(100.0), threshold_pct=1)
    assert result.status == STEADY


def test_direction_follows_the_metric():
    lower = [v / 10 for v in NOISE]
    assert call("c", THROUGHPUT, builds([*lower, 8.1]), tonight(8.0), threshold_pct=1).status == REGRESSION
    assert call("c", THROUGHPUT, builds([*lower, 12.4]), tonight(12.5), threshold_pct=1).status == IMPROVEMENT
    assert call("c", TTFT, builds([*NOISE, 81.0]), tonight(80.0), threshold_pct=1).status == IMPROVEMENT


def test_too_little_history_or_no_value_calls_nothing():
    assert call("c", TTFT, builds(NOISE[:2]), tonight(200.0), threshold_pct=1).status == NO_HISTORY
    assert call("c", TTFT, builds(NOISE), tonight(None), threshold_pct=1).status == NO_VALUE


def test_the_band_is_robust_to_one_wild_value():
    assert band([*NOISE, 1000.0]).median == pytest.approx(100.5)
    assert band([*NOISE, 1000.0]).spread < 3


def test_a_constant_accuracy_does_not_move_and_a_drop_does():
    accuracy = metric("gsm8k_strict_match")
    assert call("c", accuracy, builds([1.0] * 8), tonight(1.0), threshold_pct=1).status == STEADY
    assert call("c", accuracy, builds([1.0] * 8), tonight(6 / 7), threshold_pct=1).status == STEADY, "one night"
    assert call("c", accuracy, builds([1.0] * 9), tonight(6 / 7), threshold_pct=1).status == STEADY
    assert call("c", accuracy, builds([*[1.0] * 8, 6 / 7]), tonight(6 / 7), threshold_pct=1).status == REGRESSION


def test_every_call_states_the_step_it_could_have_seen():
    quiet = call("c", TTFT, builds(NOISE), tonight(100.0), threshold_pct=1)
    noisy = call("c", TTFT, builds([v * 3 - 200 for v in NOISE]), tonight(100.0), threshold_pct=1)
    assert quiet.detectable_pct is not None and noisy.detectable_pct is not None
    assert 1.0 <= quiet.detectable_pct < noisy.detectable_pct < 12.0
    assert noisy.detectable_pct == pytest.approx(3 * quiet.detectable_pct, rel=0.05), "it scales with the noise"
    assert call("c", TTFT, builds(NOISE[:2]), tonight(100.0), threshold_pct=1).detectable_pct is None
