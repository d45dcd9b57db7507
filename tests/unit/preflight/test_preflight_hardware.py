"""Driver, GPU, interconnect and idle checks on the captured 2x H200 and the simulated 8-GPU machines."""

from __future__ import annotations

import os
from dataclasses import replace

from preflight_fixtures import GPU_FIXTURES, TEST_PROFILE, h200x2_readings

from afd_e2e.gpu.inventory import build_inventory
from afd_e2e.gpu.readings import ProcessReading, load_readings
from afd_e2e.plan import build_plan
from afd_e2e.preflight.checks import FAIL, PASS, SKIP, WARN
from afd_e2e.preflight.interconnect import role_pairs
from afd_e2e.preflight.run_checks import hardware_checks, read_inventory
from afd_e2e.profile import load_profile

MIB = 1024 * 1024
SEED_DEVICES = (0, 2, 4, 6, 1, 3, 5, 7)


def checks_for(profile, readings, devices=None):
    plan = build_plan(profile, model_path="/m", devices=devices or profile.default_devices)
    return {c.name: c for c in hardware_checks(profile, plan, build_inventory(readings), "")}


def statuses(checks):
    return {name: c.status for name, c in checks.items()}


def with_hardware(profile, **changes):
    return replace(profile, hardware=replace(profile.hardware, **changes))


def test_the_two_gpu_test_profile_fits_the_captured_h200_pair():
    checks = checks_for(load_profile(str(TEST_PROFILE)), h200x2_readings())
    assert set(statuses(checks).values()) == {PASS}, checks
    assert checks["interconnect"].measured == "1 pair: NV18 x1"
    assert checks["interconnect afd-1a1f"].measured == "GPU0-GPU1 NV18"
    assert checks["idle GPU1"].measured == "0 MiB used, no compute process"
    assert checks["agent tags"].measured.startswith("gpu=nvidia-h200,gpus=2,")


def test_the_seed_profile_fits_its_pcie_machine_and_pairs_attention_with_ffn_devices():
    profile = load_profile("qwen3.5-122b-a10b")
    checks = checks_for(profile, load_readings(GPU_FIXTURES / "rtx6000x8-pcie.json"), SEED_DEVICES)
    assert set(statuses(checks).values()) == {PASS}, checks
    assert checks["nvidia driver"].measured == "595.71.05" and checks["cuda"].measured == "13.2"
    assert checks["gpu memory"].measured == "97887 MiB or more on each of 8 GPUs"
    assert checks["interconnect"].measured == "28 pairs: PIX x4, PXB x8, SYS x16"
    assert (
        checks["interconnect afd-eager-4a4f"].measured == "GPU0-GPU1 PIX, GPU2-GPU3 PIX, GPU4-GPU5 PIX, GPU6-GPU7 PIX"
    )
    assert [c for c in checks if c.startswith("idle")] == [f"idle GPU{d}" for d in SEED_DEVICES]


def test_the_topo_m_fallback_judges_the_same_as_nvml():
    profile = load_profile("qwen3.5-122b-a10b")
    checks = checks_for(profile, load_readings(GPU_FIXTURES / "rtx6000x8-pcie-smi-fallback.json"), SEED_DEVICES)
    assert checks["interconnect"].measured == "28 pairs: PIX x4, PXB x8, SYS x16"


def test_requiring_nvlink_between_roles_fails_on_pcie_and_names_the_pairs():
    profile = with_hardware(load_profile("qwen3.5-122b-a10b"), require_nvlink_between_roles=True)
    check = checks_for(profile, load_readings(GPU_FIXTURES / "rtx6000x8-pcie.json"), SEED_DEVICES)[
        "interconnect afd-eager-4a4f"
    ]
    assert check.status == FAIL
    assert "GPU0-GPU1, GPU2-GPU3, GPU4-GPU5, GPU6-GPU7" in check.fix
    nvswitch = load_readings(GPU_FIXTURES / "h200x8-nvswitch.json")
    assert checks_for(profile, nvswitch, SEED_DEVICES)["interconnect afd-eager-4a4f"].status == PASS


def test_a_profile_validated_on_pcie_only_rejects_nvlink_pairs():
    profile = with_hardware(
        load_profile(str(TEST_PROFILE)), interconnects=("pcie",), require_nvlink_between_roles=False
    )
    check = checks_for(profile, h200x2_readings())["interconnect"]
    assert check.status == FAIL and "GPU0-GPU1 NV18" in check.measured


def test_role_pairs_spread_attention_ranks_over_fewer_ffn_ranks():
    profile = load_profile("qwen3.5-122b-a10b")
    plan = build_plan(profile, model_path="/m", devices=SEED_DEVICES)
    assert role_pairs(plan.case("afd-eager-4a4f")) == [(0, 1), (2, 3), (4, 5), (6, 7)]


def test_driver_cuda_count_memory_and_models_fail_with_the_wanted_value():
    profile = with_hardware(
        load_profile(str(TEST_PROFILE)),
        min_driver="590.0",
        min_cuda="13.1",
        gpus=4,
        min_memory_mib=150000,
        gpu_models=("NVIDIA H100 80GB HBM3",),
    )
    checks = checks_for(profile, h200x2_readings(), devices=(0, 1))
    assert checks["nvidia driver"].status == FAIL and checks["nvidia driver"].wanted == ">= 590.0"
    assert checks["cuda"].status == FAIL and checks["cuda"].measured == "13.0"
    assert checks["gpu count"].status == FAIL and checks["gpu count"].measured == "2 GPUs"
    assert checks["gpu memory"].status == FAIL and checks["gpu memory"].measured == "GPU0 143771 MiB, GPU1 143771 MiB"
    assert checks["gpu models"].status == FAIL and checks["gpu models"].measured == "NVIDIA H200"
    allowed = with_hardware(profile, gpu_models=("nvidia-h200",))
    assert checks_for(allowed, h200x2_readings(), devices=(0, 1))["gpu models"].status == PASS


def test_devices_not_on_the_machine_fail_and_name_the_ids():
    profile = load_profile("qwen3.5-122b-a10b")
    checks = checks_for(profile, h200x2_readings(), SEED_DEVICES)
    assert checks["devices"].status == FAIL
    assert checks["devices"].measured == "GPU 2,4,6,3,5,7 not on this machine (it has GPUs 0-1)"
    assert checks["interconnect"].status == SKIP
    assert checks["agent tags"].status == WARN and checks["agent tags"].wanted == "gpus=8"


def test_a_compute_process_makes_its_gpu_busy_naming_the_pid():
    readings = h200x2_readings()
    held = 2 * 1024 * MIB
    busy = replace(
        readings.gpus[1],
        used_bytes=readings.gpus[1].used_bytes + held + 500 * MIB,
        processes=(ProcessReading(os.getpid(), held),),
    )
    checks = checks_for(load_profile(str(TEST_PROFILE)), replace(readings, gpus=(readings.gpus[0], busy)))
    assert checks["idle GPU0"].status == PASS
    idle1 = checks["idle GPU1"]
    assert idle1.status == FAIL
    assert f"pid {os.getpid()} (" in idle1.measured and "holding 2048 MiB" in idle1.measured
    expected_used = (busy.used_bytes - busy.reserved_bytes) // MIB  # the capture's v1 used is 1 MiB under reserved
    assert idle1.measured.startswith(f"{expected_used} MiB used by") and expected_used >= 2547
    assert idle1.fix.startswith(f"stop it (kill {os.getpid()})")


def test_memory_held_without_a_visible_process_fails_and_v1_only_readings_warn():
    readings = h200x2_readings()
    held = replace(readings.gpus[0], used_bytes=readings.gpus[0].used_bytes + 1024 * MIB)
    checks = checks_for(load_profile(str(TEST_PROFILE)), replace(readings, gpus=(held, readings.gpus[1])))
    assert checks["idle GPU0"].status == FAIL
    assert (
        checks["idle GPU0"].measured
        == f"{(held.used_bytes - held.reserved_bytes) // MIB} MiB used, no compute process visible"
    )
    v1_only = checks_for(load_profile(str(TEST_PROFILE)), h200x2_readings(with_reserved=False))
    assert v1_only["idle GPU0"].status == WARN and "615 MiB" in v1_only["idle GPU0"].measured


def test_cpu_profiles_skip_the_gpu_checks_and_cuda_profiles_without_nvml_fail_the_driver():
    def unavailable():
        from afd_e2e.gpu.nvml import NvmlUnavailable

        raise NvmlUnavailable("NVML cannot initialise: NVML Shared Library Not Found")

    tiny = load_profile("tiny-cpu")
    inventory, why = read_inventory(tiny, unavailable)
    assert inventory is None and why == "profile tiny-cpu runs on the CPU"
    checks = hardware_checks(tiny, build_plan(tiny, model_path="/m"), inventory, why)
    assert {c.status for c in checks} == {SKIP} and all(c.measured == why for c in checks)

    profile = load_profile(str(TEST_PROFILE))
    inventory, why = read_inventory(profile, unavailable)
    checks = {c.name: c for c in hardware_checks(profile, build_plan(profile, model_path="/m"), inventory, why)}
    assert checks["nvidia driver"].status == FAIL and "Shared Library Not Found" in checks["nvidia driver"].measured
    assert {c.status for name, c in checks.items() if name != "nvidia driver"} == {SKIP}


def test_pairs_nothing_could_place_warn_by_name_and_never_pass_as_pcie_or_fail_as_no_nvlink():
    profile = with_hardware(load_profile("qwen3.5-122b-a10b"), require_nvlink_between_roles=True)
    readings = load_readings(GPU_FIXTURES / "h200x8-nvswitch.json")
    unplaced = replace(readings, gpus=tuple(replace(g, nvlinks=()) for g in readings.gpus), pairs={})
    checks = checks_for(profile, unplaced, SEED_DEVICES)
    pairs, roles = checks["interconnect"], checks["interconnect afd-eager-4a4f"]
    assert pairs.status == WARN and "unknown: GPU0-GPU2, GPU0-GPU4" in pairs.measured
    assert "NVML could not place these pairs" in pairs.fix
    assert roles.status == WARN and "unknown: GPU0-GPU1, GPU2-GPU3, GPU4-GPU5, GPU6-GPU7" in roles.measured
