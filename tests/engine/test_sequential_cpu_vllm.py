"""Engine tier: the sequential performance series on the real CPU vLLM (tiny model), through ``execute_run``, in
blocks of fresh launches, as a pair that shares its devices alternates (``plan/series.py``).

One profile, three cases of the same engine configuration (every engine step of each first sleeps inside the fault
plugin, ``tests/fault_plugin``: 100 ms, and 100 ms more for ``slowed``), in the order ``slowed``, ``twin-blocks``,
``base``; two comparisons against ``base`` with ``repetitions: {min: 2, max: 4}`` and TPOT gated (``on_worse:
fail``). ``alternation: auto`` chooses per pair: ``base`` is planned after both, so each pair alternates **blocks**:
once ``base`` is over, each side is launched afresh for a block of 2 (the first look after the second block a side).
Proves: the twin pair ends ``parity`` or ``inconclusive``, never ``worse``, with every block, its launch and its
hygiene recorded, nothing left between blocks; the slowed pair ends ``worse`` on TPOT after its second blocks and
fails its comparison; results.json, the annotation and JUnit show both.

The other way a pair alternates, **repetitions** (the baseline held up while the candidate runs), is not run here: a
twin pair of it cost CI ~2 minutes (a launch and up to 8 bench runs), and CI had 1 to 2 of its 30 minutes left. Its
statistics are the same comparison's (the bisect module's commit 1 ends ``parity`` on this engine with them); the
held order and the looks are the unit tier's (``tests/unit/runner/``).

vLLM launches: 3 cases + 4 relaunches (a block of each side per pair; max 4 leaves room for one). The bench is small
(8 prompts of 32 tokens in, 8 out, 4 at a time): 14 bench runs of ~10 s, the module about 4 to 5 minutes on 2 shared
cores. The issue asked {min: 2, max: 6}; max 4 keeps the module inside CI's time, and a third block would only
repeat what the second shows. Ports 23000-23199 (this module's block: 23000, 23020, 23040).
"""

from __future__ import annotations

import importlib.util
import json
import re
import xml.etree.ElementTree as ET

import pytest
import yaml

from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.results.store import results_to_json
from afd_e2e.runner.run import execute_run
from repo_paths import REPO

# the most vLLM servers this module starts (tests/launch_counter.py): 3 cases + a relaunch per block of each side of
# two pairs
LAUNCHES = 7

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(
        importlib.util.find_spec("afd_e2e_fault_plugin") is None,
        reason="the fault plugin is not installed: pip install -e tests/fault_plugin (scripts/test does)",
    ),
]
PORT_BASE = 23000
# Every case's engine step first sleeps STEP_S (the fault plugin), so TPOT (~104 ms) is the plugin's fixed work, ~96%
# of it, more than the tiny model's 2-4 ms of compute, whose level differs between two servers of one configuration on
# 2 shared cores by up to 2x (with 20 ms steps a run read the twin -49% "better" at 3 repetitions, CV 10%; the bisect
# test's 100 ms steps decide parity at two repetitions, 90% interval within +-1%); the slowed case sleeps SLOW_STEP_S
# more. TPOT's margin is 15% for the same reason. Each bench repetition costs ~10 s of `vllm bench serve` start-up
# for ~2 s of traffic, so the fewer repetitions that decide, the shorter CI: two a side, warm-up none (the engine
# is eager: nothing to compile or capture on the first requests).
STEP_S = 0.1
SLOW_STEP_S = 0.1


def _profile(tmp_path):
    data = yaml.safe_load((REPO / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text(encoding="utf-8"))
    data["name"] = "tiny-cpu-sequential"
    data["engine"]["port_base"] = PORT_BASE
    case = {"kind": "native", "phases": ["performance"], "topology": {"dp": 1, "tp": 1, "ep": False}}
    data["cases"] = {
        "slowed": {**case, "env": {"AFD_E2E_FAULT_SLOW_STEP_S": f"{STEP_S + SLOW_STEP_S:g}"}},
        "twin-blocks": {**case, "env": {"AFD_E2E_FAULT_SLOW_STEP_S": f"{STEP_S:g}"}},
        "base": {**case, "env": {"AFD_E2E_FAULT_SLOW_STEP_S": f"{STEP_S:g}"}},
    }
    bench = data["workloads"]["bench"]
    bench.update(input_len=32, output_len=8, num_prompts=8, max_concurrency=4, warmups=0)
    bench["repetitions"] = {"min": 2, "max": 4}
    bench["metrics"] = {
        "mean_tpot_ms": {"on_worse": "fail", "margin_pct": 15},
        "output_throughput": {"on_worse": "note"},
    }
    data["workloads"] = {"smoke": data["workloads"]["smoke"], "bench": bench}
    data["comparisons"] = {
        "base-vs-slowed": {"baseline": "base", "candidate": "slowed", "measures": ["performance"]},
        "base-vs-twin-blocks": {"baseline": "base", "candidate": "twin-blocks", "measures": ["performance"]},
    }
    path = tmp_path / "tiny-cpu-sequential.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return load_profile(str(path))


@pytest.fixture(scope="module")
def run(tiny_model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sequential")
    profile = _profile(tmp)
    plan = build_plan(profile, model_path=str(tiny_model))
    assert [(p.candidate, p.alternation) for p in plan.series] == [
        ("slowed", "blocks"),
        ("twin-blocks", "blocks"),
    ]
    out = tmp / "out"
    results = execute_run(profile, plan, out)
    return results_to_json(results), out


def test_the_slowed_candidate_ends_worse_on_tpot_and_fails_its_comparison(run):
    data, _out = run
    perf = data["comparisons"]["base-vs-slowed"]["performance"]
    tpot = next(m for m in perf["metrics"] if m["key"] == "mean_tpot_ms")
    assert tpot["verdict"] == "worse", tpot
    assert tpot["candidate"]["mean"] - tpot["baseline"]["mean"] >= 0.5 * SLOW_STEP_S * 1000, tpot
    assert perf["status"] == "failed" and "TPOT worse" in perf["failure"], perf["failure"]
    series = perf["sequential"]
    assert series["alternation"] == "blocks" and series["step"] == 2
    assert series["stopped"] == "decided" and series["looks"][-1]["verdicts"]["mean_tpot_ms"] == "worse"
    assert [look["candidate_repetitions"] for look in series["looks"]] == [4]  # the first look: after block 2
    assert series["baseline_repetitions"] == [1, 2, 3, 4]  # base's own launch, then its first block for this pair
    # slowed ran first, so it leads: slowed, base, then a fresh launch of each
    assert [(b["side"], b["block"]) for b in series["blocks"]] == [
        ("slowed", 1),
        ("base", 1),
        ("slowed", 2),
        ("base", 2),
    ]
    assert data["verdict"]["status"] == "failed"


def test_the_twins_in_blocks_relaunch_each_side_leave_nothing_behind_and_never_end_worse(run):
    data, out = run
    perf = data["comparisons"]["base-vs-twin-blocks"]["performance"]
    tpot = next(m for m in perf["metrics"] if m["key"] == "mean_tpot_ms")
    assert tpot["verdict"] in ("parity", "inconclusive"), tpot
    series = perf["sequential"]
    assert (series["alternation"], series["min"], series["max"], series["step"]) == ("blocks", 2, 4, 2)
    assert series["stopped"] in ("decided", "max"), series
    assert len(series["looks"]) == 1 and series["looks"][0]["verdicts"]["mean_tpot_ms"] != "worse"
    blocks = series["blocks"]
    assert [(b["side"], b["block"], b["repetitions"]) for b in blocks[:2]] == [
        ("twin-blocks", 1, [1, 2]),
        ("base", 1, [1, 2]),
    ]
    added = blocks[2:]
    assert [(b["side"], b["block"]) for b in added] == [("twin-blocks", 2), ("base", 2)]
    assert added[0]["repetitions"] == [3, 4]
    # base's block for this series follows the one it ran for slowed: its own indices, not that series'
    assert added[1]["repetitions"] == series["baseline_repetitions"][2:] == [5, 6]
    for block in added:
        assert block["status"] == "passed" and block["launch_to_ready_s"] > 0, block
        assert {c["check"]: c["status"] for c in block["hygiene"]} == {
            "processes": "passed",
            "forced_kill": "passed",
            "ports": "passed",
            "gpu_memory": "skipped",  # no GPU on the CPU engine
            "leftover_files": "passed",
        }, block["hygiene"]
        (server,) = block["processes"]
        assert server["exit_code"] == 0 and not server["forced_kill"]
        assert (out / server["log"]).is_file() and f"base-vs-twin-blocks-block-{block['block']}" in server["log"]
    # a side's block effect is recorded on the gated metric, whether or not it is beyond the noise
    effects = {(e["side"], e["metric"]) for e in series["block_effects"]}
    assert {("twin-blocks", "mean_tpot_ms"), ("base", "mean_tpot_ms")} <= effects
    assert data["cases"]["twin-blocks"]["status"] == data["cases"]["base"]["status"] == "passed"


def test_annotation_and_junit_show_the_series(run):
    data, out = run
    annotation = (out / "annotation.md").read_text(encoding="utf-8")
    assert "### Performance: native DP1/TP1 \\(slowed\\) vs native DP1/TP1 \\(base\\)" in annotation
    # the verdict, then what 4+4 repetitions (two blocks a side) could see (the "Can see" column), the repetitions
    assert re.search(r"\| \*\*worse\*\* ❌ fails the gate \| ±\d+\.\d% \| 4\+4 \|", annotation)
    assert "- Sequential series (2 to 4 repetitions a side, alternating blocks, one planned look): " in annotation
    assert "- Looks (repetitions base+cand, gated verdicts): 1\\: 4\\+4 " in annotation  # after the second blocks
    assert (
        "- Blocks of 2 (each side launched afresh per block, 2 added launches): slowed 1 \\(reps 1\\-2, the case's own "
        "launch\\), base 1 \\(reps 1\\-2, the case's own launch\\), slowed 2 \\(reps 3\\-4, ready in " in annotation
    )
    testcases = [case for path in sorted(out.glob("junit/*.xml")) for case in ET.parse(path).getroot().iter("testcase")]
    tpot = {case.get("classname"): case for case in testcases if case.get("name") == "performance mean_tpot_ms"}
    slowed = next(case for name, case in tpot.items() if "slowed" in name)
    message = slowed.find("failure").get("message")
    assert message.startswith("TPOT: native DP1/TP1 (base) ") and "worse (4+4 repetitions)" in message
    (twin,) = [case for name, case in tpot.items() if "twin" in name]
    assert twin.find("failure") is None
    assert json.loads((out / "results.json").read_text())["comparisons"].keys() == data["comparisons"].keys()
