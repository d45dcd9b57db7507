"""GPU tier: a pair that shares its GPU alternates blocks of fresh launches (``plan/series.py``, ``run_blocks``) on a
real engine (the tiny DeepSeek-V2 on the kit's vLLM 0.26, one GPU, through ``afd-e2e run``).

``base`` and ``twin``, one native eager case each on GPU 0, compared on performance with ``repetitions: {min: 2,
max: 4}``: both cannot be up at once, so ``alternation: auto`` takes blocks; each side's case runs its first block,
then each is launched afresh for a second block of 2 (the first look comes after the second block a side; nothing
is gated, so that look decides). Proves, where only a GPU can: every added block's teardown gives the GPU's memory
back (the hygiene check reads NVML), no SIGKILL was needed, and the block effect is recorded.

Four model loads. Skips, with the reason, without a GPU or ``AFD_GPU_E2E_MODEL``.
"""

from __future__ import annotations

import os

import pytest
import yaml

from afd_e2e.results import load_results
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.results.status import Status
from gpu_agent import REPO, afd_e2e, why_not_gpus

pytestmark = pytest.mark.gpu

PROFILE = REPO / "python/afd_e2e/profiles/tiny-gpu-1a1f.yaml"


def _document() -> dict:
    document = yaml.safe_load(PROFILE.read_text(encoding="utf-8"))
    document.update(
        name="tiny-gpu-blocks",
        description="SMOKE on real GPUs: tiny random DeepSeek-V2, two native cases sharing GPU 0, alternating blocks",
        hardware={**document["hardware"], "gpus": 1},
        agent_tags={**document["agent_tags"], "gpus": "1"},
        software={**document["software"], "afd_plugin": False},
        devices={"count": 1, "default": [0], "groups": {"attention": [0, 1]}},
    )
    native = {"kind": "native", "phases": ["performance"], "topology": {"devices": "attention", "dp": 1, "tp": 1}}
    document["cases"] = {"base": native, "twin": native}
    document["comparisons"] = {"base-vs-twin": {"baseline": "base", "candidate": "twin", "measures": ["performance"]}}
    bench = {**document["workloads"]["bench"], "repetitions": {"min": 2, "max": 4}, "num_prompts": 32}
    bench["metrics"] = {"mean_tpot_ms": {"on_worse": "warn"}, "output_throughput": {"on_worse": "warn"}}
    document["workloads"] = {"smoke": document["workloads"]["smoke"], "bench": bench}
    return document


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if reason := why_not_gpus(1):
        pytest.skip(reason)
    if not os.environ.get("AFD_GPU_E2E_MODEL"):
        pytest.skip("AFD_GPU_E2E_MODEL is not set")
    out = tmp_path_factory.mktemp("blocks-gpu")
    profile = tmp_path_factory.mktemp("profile") / "tiny-gpu-blocks.yaml"
    profile.write_text(yaml.safe_dump(_document(), sort_keys=False), encoding="utf-8")
    done = afd_e2e("run", "--profile", str(profile), "--out", str(out), timeout=1500, devices="0")
    return done.returncode, load_results(out)


def test_the_pair_on_one_gpu_is_planned_as_blocks(run):
    _, results = run
    (series,) = results.plan.series
    assert (series.alternation, series.step, series.launches) == ("blocks", 2, 2)
    assert series.reason == "auto: the pair shares devices [0], so both cannot be up at once"


def test_each_added_block_is_a_fresh_launch_that_gives_the_gpu_back(run):
    code, results = run
    record = results.case("twin").section(PERFORMANCE).sequential
    print(record.stopped, record.reason, [(b.side, b.block, b.repetitions, b.status) for b in record.blocks])
    assert record.alternation == "blocks" and record.stopped == "decided" and len(record.looks) == 1
    assert [(b.side, b.block) for b in record.blocks] == [("base", 1), ("twin", 1), ("base", 2), ("twin", 2)]
    for block in record.blocks[2:]:
        checks = {c.check: (c.status, c.detail) for c in block.hygiene}
        print(block.side, block.block, block.launch_to_ready_s, block.teardown_s, checks)
        assert block.status is Status.PASSED and block.repetitions, block
        assert checks["gpu_memory"][0] is Status.PASSED, checks  # NVML read the GPU back at its level before
        assert checks["forced_kill"][0] is Status.PASSED and checks["ports"][0] is Status.PASSED
        (server,) = block.processes
        assert server.exit_code == 0 and not server.forced_kill
    assert {(e.side, e.metric) for e in record.block_effects} >= {("base", "mean_tpot_ms"), ("twin", "mean_tpot_ms")}
    assert code == 0 and results.status is Status.PASSED
