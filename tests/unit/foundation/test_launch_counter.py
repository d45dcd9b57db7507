"""Unit tier: what the suite's launch counter (tests/launch_counter.py) takes for a vLLM launch, from real process titles."""

from __future__ import annotations

import pytest

from launch_counter import is_vllm_serve


@pytest.mark.parametrize(
    ("argv", "launch"),
    [
        (["/venv/bin/python", "/venv/bin/vllm", "serve", "/m", "--port", "8000"], True),  # console script
        (["/venv/bin/vllm", "serve", "/m"], True),
        (["/usr/bin/python3", "-m", "vllm.entrypoints.cli.main", "serve", "/m"], True),  # the GPU kit's wrapper
        (["/venv/bin/python", "/venv/bin/vllm", "bench", "serve", "--base-url", "x"], False),  # a bench, own process
        (["/venv/bin/vllm", "bench", "serve", "--base-url", "x"], False),  # a warm bench client's child (its title)
        (["/venv/bin/python", "/repo/bench_client_script.py"], False),
    ],
)
def test_only_an_api_server_counts_as_a_launch(argv, launch):
    assert is_vllm_serve(argv) is launch
