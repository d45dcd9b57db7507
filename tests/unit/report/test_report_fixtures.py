"""The fixtures themselves: the seed's published numbers, five repetitions a side consistent with mean ± std."""

from __future__ import annotations

import statistics

import pytest

from afd_e2e.results import SCHEMA

SEED_TABLE = {  # key: (baseline mean, std, candidate mean, std, published delta)
    "request_throughput": (2.4047, 0.0195, 2.4295, 0.0092, "+1.03%"),
    "output_throughput": (307.80, 2.50, 310.98, 1.18, "+1.03%"),
    "mean_ttft_ms": (371.29, 13.39, 404.24, 6.16, "+8.87%"),
    "mean_tpot_ms": (100.13, 0.78, 98.88, 0.38, "-1.25%"),
    "mean_itl_ms": (100.13, 0.78, 98.88, 0.38, "-1.25%"),
    "mean_e2el_ms": (13088.36, 109.82, 12962.50, 49.08, "-0.96%"),
}


def test_seed_fixture_carries_the_published_table(seed_results: dict) -> None:
    assert seed_results["schema"] == SCHEMA
    metrics = {m["key"]: m for m in seed_results["comparisons"]["performance"]["performance"]["metrics"]}
    assert metrics.keys() == SEED_TABLE.keys()
    for key, (base_mean, base_std, cand_mean, cand_std, delta) in SEED_TABLE.items():
        metric = metrics[key]
        for side, mean, std in (("baseline", base_mean, base_std), ("candidate", cand_mean, cand_std)):
            values = metric[side]["values"]
            assert len(values) == 5
            assert metric[side]["mean"] == pytest.approx(mean, abs=1e-9)
            assert metric[side]["std"] == pytest.approx(std, abs=1e-5)
            assert statistics.mean(values) == pytest.approx(mean, abs=1e-5)
            assert statistics.stdev(values) == pytest.approx(std, abs=1e-5)
        assert f"{(cand_mean - base_mean) / base_mean * 100:+.2f}%" == delta
        assert f"{metric['delta_pct']:+.2f}%" == delta


def test_seed_repetitions_match_the_aggregated_values(seed_results: dict) -> None:
    comparison = seed_results["comparisons"]["performance"]
    metrics = comparison["performance"]["metrics"]
    for side in ("baseline", "candidate"):
        reps = seed_results["cases"][comparison[side]]["performance"]["repetitions"]
        assert [rep["completed"] for rep in reps] == [1024] * 5
        for metric in metrics:
            assert [rep["metrics"][metric["key"]] for rep in reps] == metric[side]["values"]
