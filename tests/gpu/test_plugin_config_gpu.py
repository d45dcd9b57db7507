"""GPU tier: preflight's ``afd plugin config`` check asks the real installed AFD plugin (the unit tier has only a
stub). The plugin's ``afd_plugin.config.parse_afd_config`` runs in the ``vllm`` interpreter on a 3A2F and a 2A3F
P2P config, and its own verdicts are asserted: 2A3F (A < F) is refused by every plugin version; 3A2F is accepted by
a plugin with PR #309 and refused by an older one naming its multiple-of rule (the test prints which). Then the
whole check on a planned 3A2F case says the same. No GPU is used (the plugin's config code is CPU-safe); it runs
where the plugin is installed, the GPU machine.

The ``vllm`` interpreter is the ``vllm`` executable's where one is on PATH, else this Python where it imports vLLM
(the GPU kit's way: vLLM and the plugin on PYTHONPATH); skipped with the reason where that interpreter cannot
import ``afd_plugin.config``.

Run on the GPU machine after `. /tmp/vl/env.sh`: python3 -m pytest tests/gpu/test_plugin_config_gpu.py -v -s -m gpu
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from afd_e2e.plan import build_plan
from afd_e2e.preflight.checks import FAIL, PASS
from afd_e2e.preflight.plugin_config import ConfigQuery, ask_installed_plugin, check_plugin_config
from afd_e2e.preflight.software import read_installed
from afd_e2e.profile import parse_profile

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
A_BELOW_F = "P2pNcclAFDConnector currently requires num_attention_ranks >= num_ffn_ranks, got 2 < 3"
NOT_A_MULTIPLE = (
    "P2pNcclAFDConnector currently requires num_attention_ranks to be a multiple of num_ffn_ranks, got 3 and 2"
)


def vllm_python() -> str:
    installed = read_installed("vllm")
    if installed.vllm_python is not None:
        return installed.vllm_python
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    pytest.skip(f"no vllm executable ({installed.problem}) and this Python cannot import vllm")


@pytest.fixture(scope="module")
def python() -> str:
    found = vllm_python()
    probe = subprocess.run(
        [found, "-c", "import afd_plugin.config"], capture_output=True, text=True, timeout=60, check=False, cwd="/"
    )
    if probe.returncode != 0:
        tail = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"afd_plugin is not importable by {found}: {tail}")
    return found


def p2p(role: str, attention: int, ffn: int) -> ConfigQuery:
    afd = {
        "role": role,
        "connector": "P2pNcclAFDConnector",
        "host": "127.0.0.1",
        "port": 29500,
        "num_attention_ranks": attention,
        "num_ffn_ranks": ffn,
    }
    return ConfigQuery(f"afd-{attention}a{ffn}f", role, role, {"afd": afd})


def test_the_installed_plugin_refuses_2a3f_and_judges_3a2f_by_its_version(python):
    answer = ask_installed_plugin(
        python, [p2p(r, 2, 3) for r in ("ffn", "attention")] + [p2p(r, 3, 2) for r in ("ffn", "attention")]
    )
    assert answer.problem is None and answer.import_error is None, answer
    below_ffn, below_attention, ffn, attention = answer.verdicts
    assert below_ffn == below_attention == f"ValueError: {A_BELOW_F}"
    assert ffn == attention
    print(f"\n3A2F by the plugin in {python}: {'accepted (PR #309)' if ffn is None else ffn}")
    assert ffn in (None, f"ValueError: {NOT_A_MULTIPLE}")


def test_the_check_on_a_planned_3a2f_case_says_what_the_plugin_says(python):
    doc = yaml.safe_load((REPO / "python/afd_e2e/profiles/deepseek-v2-lite-2a2f.yaml").read_text())
    doc["hardware"]["gpus"] = doc["devices"]["count"] = 5
    doc["agent_tags"]["gpus"] = "5"
    doc["devices"]["default"] = [0, 1, 2, 3, 4]
    doc["devices"]["groups"].update(a3=[0, 3], f2=[3, 5])
    doc["cases"]["afd-3a2f"] = {
        "kind": "afd",
        "phases": ["smoke"],
        "attention": {"devices": "a3", "dp": 3, "tp": 1},
        "ffn": {"devices": "f2", "dp": 2, "tp": 1},
    }
    profile = parse_profile(doc, "five-gpus.yaml")
    plan = build_plan(profile, model_path="/m", case_ids=["afd-3a2f"])
    found = read_installed("vllm")  # the kit's plugin on PYTHONPATH may have no entry point: importable is enough
    installed = replace(found, vllm_python=python, afd_plugin=found.afd_plugin or "afd_plugin on PYTHONPATH")
    check = check_plugin_config(profile, plan, installed)
    print(f"\n{check.status}: {check.measured}")
    if check.status == PASS:
        assert check.measured == f"2 AFD process config(s) accepted by afd_plugin.config in {python}"
    else:
        assert check.status == FAIL and NOT_A_MULTIPLE in check.measured
        assert check.measured.startswith("case afd-3a2f ffn: the installed plugin")
