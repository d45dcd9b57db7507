"""``workloads.capacity``: read from a profile, refused with one line naming the key and the fix."""

from __future__ import annotations

import math

import pytest

from afd_e2e.errors import UsageError
from afd_e2e.profile import load_profile
from afd_e2e.profile.bench_spec import bench_spec
from afd_e2e.profile.capacity_spec import read_capacity
from afd_e2e.profile.reader import Reader

PROFILE = load_profile("tiny-cpu")


def read(body: dict):
    return read_capacity(Reader("p.yaml", body, "workloads.capacity"), PROFILE)


SEARCH = {
    "variable": "request_rate",
    "search": {"start": 2, "upper": 16, "levels": 8},
    "slo": {"ttft_ms": 500, "tpot_ms": 50},
}


def test_a_search_reads_with_the_bench_s_settings_as_defaults():
    spec = read(SEARCH)
    assert spec.slo.attainment == 0.9 and spec.slo.goodput_args() == ("--goodput", "ttft:500", "tpot:50")
    assert (
        spec.num_prompts == bench_spec(PROFILE).num_prompts
        and spec.max_concurrency == bench_spec(PROFILE).max_concurrency
    )
    assert spec.grid() == (2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0)
    assert spec.search.coarse_step == 2 and spec.far_miss_below == 0.45 and spec.unit == "req/s"


def test_concurrency_levels_are_whole_numbers_and_explicit_levels_sorted():
    spec = read({"variable": "max_concurrency", "search": {"start": 1, "upper": 8, "levels": 4}, "slo": SEARCH["slo"]})
    assert spec.grid() == (1.0, 3.0, 6.0, 8.0) and all(v == int(v) for v in spec.grid())
    explicit = read({"variable": "request_rate", "levels": [8, 2, 4], "slo": SEARCH["slo"]})
    assert explicit.grid() == (2.0, 4.0, 8.0) and explicit.search is None
    assert math.isinf(read({**SEARCH, "request_rate": float("inf")}).request_rate)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({**SEARCH, "variable": "qps"}, "unknown load variable 'qps'"),
        ({**SEARCH, "levels": [1, 2]}, "needs exactly one of levels and search"),
        ({"variable": "request_rate", "slo": SEARCH["slo"]}, "needs exactly one of levels and search"),
        ({**SEARCH, "search": {"start": 8, "upper": 2, "levels": 3}}, "needs 0 < start < upper"),
        ({**SEARCH, "slo": {"ttft_ms": 500, "tpot_ms": 50, "attainment": 1.5}}, "must be in (0, 1]"),
        ({**SEARCH, "slo": {"ttft_ms": 0, "tpot_ms": 50}}, "targets must be > 0 ms"),
        ({**SEARCH, "on_worse": "explode"}, "unknown action 'explode'"),
        ({**SEARCH, "far_miss_below": 0.95}, "must be in [0, attainment)"),
        ({**SEARCH, "repetition": 2}, "unknown key"),
        ({"variable": "max_concurrency", "levels": [1.5], "slo": SEARCH["slo"]}, "whole numbers"),
    ],
)
def test_bad_sections_are_one_line_errors(body, words):
    with pytest.raises(UsageError) as err:
        read(body)
    assert words in str(err.value) and "workloads.capacity" in str(err.value)
