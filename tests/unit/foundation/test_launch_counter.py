"""Unit tier: what the suite's launch counter (tests/launch_counter.py) takes for a vLLM launch, from real process
titles; every engine module declares the most servers it starts (``LAUNCHES``), and one that starts more is named."""

from __future__ import annotations

import ast

import pytest

from launch_counter import is_vllm_serve, over_declared
from repo_paths import REPO

ENGINE_MODULES = sorted((REPO / "tests" / "engine").glob("*.py"))


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


def _declared(path):
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["LAUNCHES"]:
            return ast.literal_eval(node.value)
    return None


@pytest.mark.parametrize("path", ENGINE_MODULES, ids=lambda path: path.name)
def test_every_engine_module_declares_the_most_servers_it_starts(path):
    declared = _declared(path)
    assert isinstance(declared, int) and declared >= 0, f"{path.name}: add LAUNCHES = N (0 if it starts no server)"
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    if declared:  # a launch is named, with its reason, where a reader looks first
        assert "launch" in docstring.lower(), f"{path.name}: say in its docstring what it launches and why"


def test_a_module_over_its_declared_launches_is_named_and_an_undeclared_one_only_counted():
    launched = {"tests/engine/test_a.py": 3, "tests/engine/test_b.py": 2, "tests/gpu/test_c.py": 5}
    declared = {"tests/engine/test_a.py": 2, "tests/engine/test_b.py": 2, "tests/gpu/test_c.py": None}
    (line,) = over_declared(launched, declared)
    assert line.startswith("tests/engine/test_a.py started 3 vLLM servers and declares LAUNCHES = 2: ")
