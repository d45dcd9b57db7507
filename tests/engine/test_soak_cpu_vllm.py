"""The soak phase on the real CPU vLLM (engine tier), each verdict shown failing for a real cause: tiny-cpu's own
``workloads.soak`` (15 s at 4 req/s) passes on the shared run's cpu-tp1 (``tests/shared_run.py`` lists it there: no
launch of its own); the same soak on an engine that the fault plugin (``tests/fault_plugin``) makes both leak 1 MiB
on every EngineCore step and, from 5 s after its first step, sleep 8 ms longer in each step for every second fails on both
verdicts: the leak naming the role (``server``), its RSS and the growth, the drift naming TPOT, worse by more than
``drift_pct`` with its interval above zero. That each fault trips only its own verdict is shown on recorded runs
with one fault each (``tests/fixtures/soak``, ``tests/unit/workloads/test_soak.py``).

One vLLM launch (both faults are set in the engine's environment at its launch; one launch per fault would cost CI
another ~60 s for no verdict more), a one-case run of cpu-tp1 with the soak as its only phase: 58 s on 2 cores
beside the niced unit tier (start-up, the soak's 31 s: the bench client's ~9 s import, 15 s of load and the slowed
engine's backlog, teardown); the shared run's soak adds 24.5 s to its cpu-tp1. So ~83 s of engine tier in all, as
measured while the soak started its own bench client after the start-up: the case's warm client now imports vLLM
during the start-up, which should take the ~9 s import off both soaks.
Port 23700.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import pytest

from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.results.store import results_to_json
from afd_e2e.runner.run import execute_run
from afd_e2e.system.markers import find_marked
from stall_support import VerdictClock

# the most vLLM servers this module starts (tests/launch_counter.py): the leaking, slowing engine (both faults at
# one launch)
LAUNCHES = 1

pytestmark = pytest.mark.engine

PORT_BASE = 23700  # this module's block: 23700 (the faulty engine)
PROFILE = load_profile("tiny-cpu")
# at 15-60 steps a second (a slowed step, a busy machine): 15-60 MiB/s, 9-36 GiB per 10 min against 2 GiB
LEAK_MIB_PER_STEP = "1"
# from 5 s after the engine's first step (the soak's first third: the engine's own step, however slow the machine
# makes it), 8 ms more per step each second: ~60 ms in the last third, over a TPOT of 1.5-15 ms (idle to beside
# another engine): five times and more, against the bound's four
SLOW_GROWTH, SLOW_AFTER_S = "0.008", "5"
needs_plugin = pytest.mark.skipif(
    importlib.util.find_spec("afd_e2e_fault_plugin") is None,
    reason="the fault plugin is not installed: pip install -e tests/fault_plugin (scripts/test does)",
)


def soak_of(data: dict) -> dict:
    soak = data["cases"]["cpu-tp1"]["soak"]
    print(json.dumps({k: soak[k] for k in ("status", "failure", "drift", "leaks")}))
    return soak


def test_the_soak_passes_on_a_steady_engine(tiny_cpu_run):
    soak = soak_of(tiny_cpu_run.data)
    assert soak["status"] == "passed", soak["failure"]
    assert [(d["metric"], d["passed"]) for d in soak["drift"]] == [("TPOT", True), ("TTFT", True)]
    assert all(len(d["first_ms"]) >= 2 and len(d["last_ms"]) >= 2 for d in soak["drift"])
    assert [(leak["role"], leak["kind"], leak["passed"]) for leak in soak["leaks"]] == [("server", "RSS", True)]
    assert soak["repetition"]["completed"] == soak["repetition"]["num_prompts"] == 60
    assert (tiny_cpu_run.out / soak["repetition"]["path"]).is_file()


@needs_plugin
def test_a_leaking_engine_slowing_over_time_fails_the_soak_on_the_leak_and_on_drift(tiny_model, tmp_path, monkeypatch):
    monkeypatch.setenv("AFD_E2E_FAULT_LEAK_MIB_PER_STEP", LEAK_MIB_PER_STEP)
    monkeypatch.setenv("AFD_E2E_FAULT_SLOW_GROWTH", SLOW_GROWTH)
    monkeypatch.setenv("AFD_E2E_FAULT_SLOW_AFTER_S", SLOW_AFTER_S)
    plan = build_plan(PROFILE, model_path=str(tiny_model), case_ids=["cpu-tp1"], port_base=PORT_BASE)
    plan = dataclasses.replace(plan, cases=(dataclasses.replace(plan.cases[0], phases=("soak",)),))
    data = results_to_json(execute_run(PROFILE, plan, tmp_path, progress=VerdictClock()))
    soak = soak_of(data)

    assert soak["status"] == "failed" and data["cases"]["cpu-tp1"]["status"] == "failed"
    (leak,) = soak["leaks"]
    assert (leak["role"], leak["kind"], leak["passed"]) == ("server", "RSS", False)
    assert leak["growth_mib_per_10min"] > 2 * leak["bound_mib_per_10min"], leak
    assert f"leak: server RSS grew {leak['growth_mib_per_10min']:g} MiB per 10 min" in soak["failure"], soak
    tpot = soak["drift"][0]
    assert (tpot["metric"], tpot["verdict"], tpot["passed"]) == ("TPOT", "worse", False), tpot
    assert tpot["ci95_pct"][0] > 0 and tpot["delta_pct"] > soak["drift_pct"], tpot
    assert soak["failure"].startswith("drift: TPOT "), soak["failure"]
    junit = (tmp_path / "junit").glob("*.xml")
    failed = {name for xml in junit for name in ("soak drift TPOT", "soak leak server RSS") if name in xml.read_text()}
    assert failed == {"soak drift TPOT", "soak leak server RSS"}
    assert "### Soak" in (tmp_path / "annotation.md").read_text()
    run_id = json.loads((tmp_path / "run-record.json").read_text())["run_id"]
    assert find_marked(run_id) == []
