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
    result = call("c", TTFT, builds(NOISE), tonight(102.5), threshold_pct=5)
    assert result.status == STEADY
    assert result.started is None
    assert result.median == pytest.approx(100.25)
    assert result.change_pct == pytest.approx(2.244, abs=0.01)


def test_tonight_alone_outside_the_spread_is_a_regression_started_tonight():
    result = call("c", TTFT, builds(NOISE), tonight(120.0), threshold_pct=5)
    assert result.status == REGRESSION
    assert result.started.label == "#99"
    assert result.moved_nights == 1


def test_the_threshold_decides_a_borderline_night():
    assert call("c", TTFT, builds(NOISE), tonight(112.0), threshold_pct=5).status == REGRESSION
    assert call("c", TTFT, builds(NOISE), tonight(112.0), threshold_pct=15).status == STEADY


def test_several_recent_nights_moving_together_name_the_first_of_them():
    series = [*NOISE, 125.0, 124.0, 126.0]
    result = call("c", TTFT, builds(series), tonight(125.5), threshold_pct=5)
    assert result.status == REGRESSION
    assert result.started.label == "#11"
    assert result.started.url == "https://bk/11"
    assert result.moved_nights == 4
    assert result.change_pct == pytest.approx(25.19, abs=0.1)  # against the median before the change


def test_an_old_outlier_in_the_history_neither_flags_tonight_nor_starts_a_change():
    series = [*NOISE[:3], 180.0, *NOISE[3:]]
    assert call("c", TTFT, builds(series), tonight(100.0), threshold_pct=5).status == STEADY


def test_a_change_that_came_back_is_not_a_change_point():
    series = [*NOISE, 125.0, 124.0]
    result = call("c", TTFT, builds(series), tonight(100.0), threshold_pct=5)
    assert result.status == STEADY


def test_direction_follows_the_metric():
    lower = [v / 10 for v in NOISE]
    assert call("c", THROUGHPUT, builds(lower), tonight(8.0), threshold_pct=5).status == REGRESSION
    assert call("c", THROUGHPUT, builds(lower), tonight(12.5), threshold_pct=5).status == IMPROVEMENT
    assert call("c", TTFT, builds(NOISE), tonight(80.0), threshold_pct=5).status == IMPROVEMENT


def test_too_little_history_or_no_value_calls_nothing():
    assert call("c", TTFT, builds(NOISE[:2]), tonight(200.0), threshold_pct=5).status == NO_HISTORY
    assert call("c", TTFT, builds(NOISE), tonight(None), threshold_pct=5).status == NO_VALUE


def test_the_band_is_robust_to_one_wild_value():
    assert band([*NOISE, 1000.0], 0).median == pytest.approx(100.5)
    assert band([*NOISE, 1000.0], 0).spread < 3


def test_a_constant_accuracy_does_not_move_and_a_drop_does():
    accuracy = metric("gsm8k_strict_match")
    assert call("c", accuracy, builds([1.0] * 8), tonight(1.0), threshold_pct=5).status == STEADY
    assert call("c", accuracy, builds([1.0] * 8), tonight(6 / 7), threshold_pct=5).status == REGRESSION
