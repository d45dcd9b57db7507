"""Plan facts the workloads rely on: one launch per case, natural routing for correctness, the labelled control."""

from __future__ import annotations

import pytest

from afd_e2e.errors import UsageError
from afd_e2e.plan import build_plan
from afd_e2e.plan.routing_control import STRATEGY, STRATEGY_ENV
from afd_e2e.profile import load_profile

SEED = load_profile("qwen3.5-122b-a10b")
FORCED_ROUTING = (
    "VLLM_MOE_ROUTING_SIMULATION_STRATEGY",
    "AFD_BENCHMARK_FORCE_LB_TOPN_PER_RANK",
    "AFD_BENCHMARK_FORCE_LOAD_BALANCE",
)


def test_seed_workflow_costs_five_model_loads():
    plan = build_plan(SEED, model_path="/m")
    assert plan.model_loads == 5 == plan.to_dict()["model_loads"]
    both = plan.case("afd-eager-4a4f")
    assert {"correctness", "performance"} <= set(both.phases)  # one launch serves both phases
    for sweep in ("native-dp8-serving", "afd-4a4f-serving"):
        assert plan.case(sweep).phases == ("smoke", "capacity")  # every level of the sweep on one launch


def test_no_seed_process_inherits_forced_routing():
    plan = build_plan(SEED, model_path="/m")
    for case in plan.cases:
        for process in case.processes:
            for name in FORCED_ROUTING:
                assert name in process.env_unset, (case.id, process.name, name)
                assert name not in process.env_set, (case.id, process.name, name)


def test_forced_routing_control_is_an_extra_labelled_performance_only_case():
    plan = build_plan(SEED, model_path="/m", forced_routing_control=True)
    assert plan.model_loads == 6
    control = plan.case("afd-eager-4a4f-afd-balanced")
    assert control.control and control.phases == ("performance",)
    assert control.label == "AFD 4A4F, afd_balanced routing (control)"
    for process in control.processes:
        assert process.env_set[STRATEGY_ENV] == STRATEGY and STRATEGY_ENV not in process.env_unset
        assert {"AFD_BENCHMARK_FORCE_LB_TOPN_PER_RANK", "AFD_BENCHMARK_FORCE_LOAD_BALANCE"} <= set(process.env_unset)
    assert not set(control.ports) & {p for c in plan.cases if c is not control for p in c.ports}
    comparisons = {c.id: c for c in plan.comparisons}
    assert comparisons["performance-afd-balanced"].control
    assert comparisons["performance-afd-balanced"].baseline == "native-eager-dp8"
    assert not comparisons["performance"].control and not plan.case("afd-eager-4a4f").control
    assert plan.to_dict()["comparisons"][-1]["control"] is True


def test_control_needs_an_afd_performance_candidate():
    with pytest.raises(UsageError, match="no selected performance comparison with an AFD candidate"):
        build_plan(load_profile("tiny-cpu"), model_path="/m", forced_routing_control=True)
    with pytest.raises(UsageError):
        build_plan(SEED, model_path="/m", case_ids=["baseline-eager", "afd-eager-4a4f"], forced_routing_control=True)
