"""Engine tier: the sequential performance series on the real CPU vLLM (tiny model), through ``execute_run``.

One profile, three cases of the same engine configuration (``base``, its ``twin``, and ``slowed``; every engine step
of each first sleeps inside the fault plugin, ``tests/fault_plugin``: 100 ms, and 100 ms more for ``slowed``), two
comparisons against ``base`` with ``repetitions: {min: 2, max: 4}`` and TPOT gated (``on_worse: fail``). ``base`` is held up while both others
run, so each candidate alternates repetitions with it. Proves: the twin pair ends ``parity`` or ``inconclusive``,
never ``worse``, with every look and the alternating order recorded; the slowed pair ends ``worse`` on TPOT and fails
its comparison; results.json, the annotation and JUnit show both.

vLLM launches: 3 (one per case; ``base`` stays up through the other two, so no case is launched twice). The bench
is small (8 prompts of 32 tokens in, 8 out, 4 at a time): 22 bench runs of ~10 s, the module about 6.5 minutes on
2 shared cores.
Ports 23000-23199 (this module's block: 23000, 23020, 23040).
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
        "base": {**case, "env": {"AFD_E2E_FAULT_SLOW_STEP_S": f"{STEP_S:g}"}},
        "twin": {**case, "env": {"AFD_E2E_FAULT_SLOW_STEP_S": f"{STEP_S:g}"}},
        "slowed": {**case, "env": {"AFD_E2E_FAULT_SLOW_STEP_S": f"{STEP_S + SLOW_STEP_S:g}"}},
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
        "base-vs-twin": {"baseline": "base", "candidate": "twin", "measures": ["performance"]},
        "base-vs-slowed": {"baseline": "base", "candidate": "slowed", "measures": ["performance"]},
    }
    path = tmp_path / "tiny-cpu-sequential.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return load_profile(str(path))


@pytest.fixture(scope="module")
def run(tiny_model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sequential")
    profile = _profile(tmp)
    plan = build_plan(profile, model_path=str(tiny_model))
    out = tmp / "out"
    results = execute_run(profile, plan, out)
    return results_to_json(results), out


def test_the_twins_alternate_and_end_parity_or_inconclusive_never_worse(run):
    data, _out = run
    perf = data["comparisons"]["base-vs-twin"]["performance"]
    tpot = next(m for m in perf["metrics"] if m["key"] == "mean_tpot_ms")
    assert tpot["verdict"] in ("parity", "inconclusive"), tpot
    series = perf["sequential"]
    assert (series["baseline"], series["candidate"], series["min"], series["max"]) == ("base", "twin", 2, 4)
    assert series["stopped"] in ("decided", "max", "budget"), series
    looks = series["looks"]
    assert looks and looks[0]["baseline_repetitions"] == looks[0]["candidate_repetitions"] == 2
    assert [look["look"] for look in looks] == list(range(1, len(looks) + 1))
    assert all(look["verdicts"]["mean_tpot_ms"] != "worse" for look in looks)
    assert looks[-1]["verdicts"]["mean_tpot_ms"] == tpot["verdict"]  # the final verdict is the last look's
    added = series["order"][4:]
    assert added == [f"{side} rep {i}" for i in range(3, 3 + len(added) // 2) for side in ("base", "twin")]
    assert len(series["candidate_repetitions"]) == 2 + len(added) // 2 == looks[-1]["candidate_repetitions"]
    assert tpot["looks"] == 3 and len(tpot["baseline"]["values"]) == len(series["baseline_repetitions"])


def test_the_slowed_candidate_ends_worse_on_tpot_and_fails_its_comparison(run):
    data, _out = run
    perf = data["comparisons"]["base-vs-slowed"]["performance"]
    tpot = next(m for m in perf["metrics"] if m["key"] == "mean_tpot_ms")
    assert tpot["verdict"] == "worse", tpot
    assert tpot["candidate"]["mean"] - tpot["baseline"]["mean"] >= 0.5 * SLOW_STEP_S * 1000, tpot
    assert perf["status"] == "failed" and "TPOT worse" in perf["failure"], perf["failure"]
    series = perf["sequential"]
    assert series["stopped"] == "decided" and series["looks"][-1]["verdicts"]["mean_tpot_ms"] == "worse"
    # base's repetitions added for the twin are not this comparison's
    assert series["baseline_repetitions"][:2] == [1, 2]
    assert set(series["baseline_repetitions"][2:]).isdisjoint(
        data["comparisons"]["base-vs-twin"]["performance"]["sequential"]["baseline_repetitions"]
    )
    assert data["verdict"]["status"] == "failed"


def test_annotation_and_junit_show_the_series(run):
    data, out = run
    annotation = (out / "annotation.md").read_text(encoding="utf-8")
    assert "### Performance: native DP1/TP1 \\(slowed\\) vs native DP1/TP1 \\(base\\)" in annotation
    # the verdict, then what 2+2 repetitions could see (the "Can see" column), then the repetitions
    assert re.search(r"\| \*\*worse\*\* ❌ fails the gate \| ±\d+\.\d% \| 2\+2 \|", annotation)
    assert "- Sequential series (2 to 4 repetitions a side, error rates split over 3 planned looks): " in annotation
    assert "- Looks (repetitions base+cand, gated verdicts): 1\\: 2\\+2 " in annotation
    testcases = [case for path in sorted(out.glob("junit/*.xml")) for case in ET.parse(path).getroot().iter("testcase")]
    tpot = {case.get("classname"): case for case in testcases if case.get("name") == "performance mean_tpot_ms"}
    slowed = next(case for name, case in tpot.items() if "slowed" in name)
    message = slowed.find("failure").get("message")
    assert (
        message.startswith("TPOT: native DP1/TP1 (base) ")
        and "(split over 3 looks), worse (2+2 repetitions)" in message
    )
    twin = next(case for name, case in tpot.items() if "twin" in name)
    assert twin.find("failure") is None
    assert json.loads((out / "results.json").read_text())["comparisons"].keys() == data["comparisons"].keys()
