"""Ports the plan needs (held by a real listening socket here), and the software checks."""

from __future__ import annotations

import os
import socket
from dataclasses import replace

from preflight_fixtures import TEST_PROFILE
from preflight_fixtures import installed_software as software

from afd_e2e.plan import build_plan
from afd_e2e.preflight.checks import FAIL, PASS, SKIP
from afd_e2e.preflight.free_ports import check_plan_ports, plan_ports, port_ranges
from afd_e2e.preflight.software import check_software
from afd_e2e.profile import load_profile
from afd_e2e.system.ports import busy_ports

PORT_BASE = 20700  # this suite's port range is 20500-20999


def test_plan_ports_cover_api_ffn_and_connector_ports():
    plan = build_plan(load_profile(str(TEST_PROFILE)), model_path="/m", port_base=PORT_BASE)
    assert plan_ports(plan) == [20700, 20720, 20721, 20722, 20723]
    assert port_ranges(plan_ports(plan)) == "20700, 20720-20723"


def test_a_held_port_fails_naming_its_holder_and_free_ports_pass():
    plan = build_plan(load_profile(str(TEST_PROFILE)), model_path="/m", port_base=PORT_BASE)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 20722))
        holder.listen()
        [check] = check_plan_ports(plan, "127.0.0.1", busy_ports(plan_ports(plan), "127.0.0.1"))
    assert check.status == FAIL
    assert check.measured.startswith(f"20722 held by pid {os.getpid()} (")
    assert check.wanted == "free on 127.0.0.1: 20700, 20720-20723"
    assert "--port-base" in check.fix
    [check] = check_plan_ports(plan, "127.0.0.1", busy_ports(plan_ports(plan), "127.0.0.1"))
    assert check.status == PASS and check.measured == "5 ports free"


def names(checks):
    return {c.name: c for c in checks}


def test_the_expected_vllm_with_the_plugin_passes_and_both_interpreters_are_named():
    profile = load_profile(str(TEST_PROFILE))
    checks = names(check_software(profile, build_plan(profile, model_path="/m"), software()))
    assert {c.status for c in checks.values()} == {PASS}
    assert checks["vllm"].measured == (
        "0.26.0+cu130, torch 2.11.0+cu130, in /opt/venv/bin/python (the Python of /opt/venv/bin/vllm);"
        " afd-e2e runs in /opt/afd-e2e/bin/python"
    )
    assert checks["afd plugin"].measured == "afd_plugin:register in /opt/venv/bin/python"


def test_wrong_or_missing_vllm_missing_plugin_and_missing_nvml_fail():
    profile = load_profile(str(TEST_PROFILE))
    plan = build_plan(profile, model_path="/m")
    wrong = names(check_software(profile, plan, software(vllm="0.27.1")))["vllm"]
    assert wrong.status == FAIL and wrong.fix == "pip install vllm==0.26.0 into the Python that runs vllm"
    missing = names(check_software(profile, plan, software(vllm=None)))["vllm"]
    assert missing.measured.startswith("not installed in /opt/venv/bin/python")
    off_path = names(check_software(profile, plan, software(vllm_executable=None, vllm_python=None, problem="x")))
    assert off_path["vllm"].status == FAIL and "'vllm' not found (x)" in off_path["vllm"].measured
    assert off_path["afd plugin"].status == FAIL
    assert names(check_software(profile, plan, software(afd_plugin=None)))["afd plugin"].status == FAIL
    assert names(check_software(profile, plan, software(nvidia_ml_py=None)))["nvidia-ml-py"].status == FAIL


def test_a_cpu_profile_without_afd_cases_needs_neither_plugin_nor_nvml():
    tiny = load_profile("tiny-cpu")
    checks = names(
        check_software(
            tiny, build_plan(tiny, model_path="/m"), software(vllm="0.32.0+cpu", afd_plugin=None, nvidia_ml_py=None)
        )
    )
    assert checks["vllm"].status == PASS  # tiny-cpu pins no version
    assert checks["afd plugin"].status == SKIP and checks["nvidia-ml-py"].status == SKIP
    assert "routing strategy" not in checks


def test_a_forced_routing_control_needs_vllm_to_know_afd_balanced():
    profile = load_profile("tiny-gpu-1a1f")
    plan = build_plan(profile, model_path="/m", forced_routing_control=True)
    released = software(routing_strategies=("uniform_random", "normal_routing"))
    check = names(check_software(profile, plan, released))["routing strategy"]
    assert check.status == FAIL
    assert check.measured == (
        "VLLM_MOE_ROUTING_SIMULATION_STRATEGY=afd_balanced is unknown to vLLM 0.26.0+cu130:"
        " it knows uniform_random, normal_routing"
    )
    assert "--forced-routing-control" in check.fix
    unknown = software(routing_strategies=None, problem="ImportError: no torch")
    assert "cannot tell" in names(check_software(profile, plan, unknown))["routing strategy"].measured
    knows = software(routing_strategies=("uniform_random", "afd_balanced"))
    assert names(check_software(profile, plan, knows))["routing strategy"].status == PASS


def test_a_case_asking_model_runner_v2_needs_triton_beside_vllm():
    """vLLM refuses Model Runner V2 without Triton ("Model Runner V2 requires Triton": vLLM 0.32's CPU install has
    none); preflight says so before any load, naming the version, the cases and the fix."""
    profile = load_profile(str(TEST_PROFILE))
    plan = build_plan(profile, model_path="/m")
    assert "model runner" not in names(check_software(profile, plan, software()))  # every child asks V1
    v2 = load_profile(str(TEST_PROFILE))
    v2 = replace(v2, engine=replace(v2.engine, model_runner="v2"))
    plan = build_plan(v2, model_path="/m")
    refused = names(check_software(v2, plan, software(vllm="0.32.0", triton=None)))["model runner"]
    assert (
        refused.status == FAIL
        and "ask for model runner V2, and vLLM 0.32.0 in /opt/venv/bin/python has no Triton" in (refused.measured)
    )
    assert refused.fix.startswith("set model_runner: v1")
    fine = names(check_software(v2, plan, software(triton="3.5.0")))["model runner"]
    assert fine.status == PASS and "Triton 3.5.0" in fine.measured
