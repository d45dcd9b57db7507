"""Stalls on real GPUs (tiny-gpu-1a1f: a tiny DeepSeek-V2 on vLLM 0.26 + the AFD plugin, ``budgets.stall_s`` 30 s),
each an EngineCore SIGSTOPped mid-bench while every process stays alive and every ``/health`` answers:

- ``one_gpu``: the native DP1 case on GPU 0: a stall within ``stall_s`` + 2 s of the last token naming the stopped
  EngineCore, forensics taken, a telemetry timeline with GPU 0's utilisation;
- ``two_gpus``: AFD 1A1F (Attention on GPU 0, FFN on GPU 1) with the FFN's EngineCore stopped: the stall names the
  FFN as stopped, and the Attention role's stack shows where it waits.

    AFD_GPU_E2E_MODEL=/tmp/vl/tiny-dsv2 AFD_E2E_GPU_OUT=/tmp/stall-out PYTHONPATH=python:tests:$PYTHONPATH \\
        python3 -m pytest tests/gpu/test_stall_gpu.py -v -s -m gpu -k one_gpu

``AFD_E2E_GPU_OUT`` keeps each results folder (``<dir>/tiny-gpu-stall-1gpu``, ``<dir>/tiny-gpu-stall-2gpu``: results,
telemetry, forensics, plots, annotation) to commit as fixtures. Skips, with the reason, without the GPUs, a ``vllm``
executable or the checkpoint.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
import yaml

from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.results.status import Status
from afd_e2e.runner.run import execute_run
from afd_e2e.system.markers import find_marked
from afd_e2e.telemetry.sampler import read_telemetry
from gpu_agent import why_not_gpus, why_not_kit
from stall_support import LastToken, VerdictClock, bench_processes, stop_engine_mid_bench

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
MODEL = os.environ.get("AFD_GPU_E2E_MODEL", "/tmp/vl/tiny-dsv2")
PROFILE_FILE = REPO / "python/afd_e2e/profiles/tiny-gpu-1a1f.yaml"


def _why_not(gpus: int) -> str | None:
    return why_not_gpus(gpus) or why_not_kit(MODEL)


def _out(tmp_path: Path, name: str) -> Path:
    kept = os.environ.get("AFD_E2E_GPU_OUT")
    return Path(kept) / name if kept else tmp_path / name


def _profile(tmp_path: Path, *, one_gpu: bool):
    """tiny-gpu-1a1f without GSM8K (not this test's subject); for one GPU its devices cut to GPU 0."""
    document = yaml.safe_load(PROFILE_FILE.read_text(encoding="utf-8"))
    document["workloads"].pop("gsm8k", None)
    if one_gpu:
        document["name"] = "tiny-gpu-stall-1gpu"
        document["hardware"]["gpus"] = 1
        document["agent_tags"]["gpus"] = "1"
        document["devices"] = {"count": 1, "default": [0], "groups": {"attention": [0, 1]}}
        document["cases"] = {"native-dp1": document["cases"]["native-dp1"]}
        document["comparisons"] = {}
    path = tmp_path / f"{document['name']}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return load_profile(str(path))


def _run_stopped(profile, case_id: str, devices: tuple[int, ...], role: str, out: Path):
    plan = build_plan(profile, model_path=MODEL, devices=devices, case_ids=[case_id])
    plan = dataclasses.replace(plan, cases=(dataclasses.replace(plan.cases[0], phases=("performance",)),))
    api_port = next(p.api_port for p in plan.cases[0].processes if p.serves_api)
    stopped = stop_engine_mid_bench(out, role, api_port)
    clock, last = VerdictClock(echo=True), LastToken(api_port)
    try:
        results = execute_run(profile, plan, out, progress=clock)
    finally:
        last.stop()
    case = results.cases[case_id]
    print(f"\nfailure: {case.failure}\nhygiene: {[(c.check, str(c.status), c.detail) for c in case.hygiene]}")
    assert stopped, f"the {role} EngineCore was never stopped"
    assert case.status is Status.FAILED
    assert case.failure.startswith("engine stalled during performance: "), case.failure
    assert f"{role} " in case.failure and f"pid {stopped['pid']} is stopped" in case.failure, case.failure
    assert clock.stalled_at is not None and last.at is not None
    stall_s = profile.budgets.stall_s
    assert clock.stalled_at - last.at <= stall_s + 2.0, clock.stalled_at - last.at
    assert case.forensics and case.forensics[0].trigger == "stall"
    assert find_marked(results.run_id) == [] and bench_processes(api_port) == []
    assert all(c.status in (Status.PASSED, Status.SKIPPED) for c in case.hygiene), case.hygiene
    return results, case


def test_one_gpu_native_engine_stopped_mid_bench_is_a_stall_with_a_telemetry_timeline(tmp_path):
    if reason := _why_not(1):
        pytest.skip(reason)
    out = _out(tmp_path, "tiny-gpu-stall-1gpu")
    profile = _profile(tmp_path, one_gpu=True)
    _results, case = _run_stopped(profile, "native-dp1", (0,), "server", out)

    telemetry = case.section("telemetry")
    assert telemetry.roles[0].devices == [0]
    assert telemetry.roles[0].mean_gpu_util_pct is not None  # NVML sampled GPU 0 during performance
    timeline = read_telemetry(out / telemetry.path)
    assert any(sample["gpus"] and sample["gpus"][0]["index"] == 0 for sample in timeline.samples)
    assert timeline.stalls
    assert (out / "plots" / "telemetry-native-dp1.png").stat().st_size > 0
    assert "telemetry-native-dp1.png" in (out / "annotation.md").read_text()


def test_two_gpus_afd_ffn_engine_stopped_mid_bench_is_a_stall_naming_the_ffn_stopped(tmp_path):
    if reason := _why_not(2):
        pytest.skip(reason)
    out = _out(tmp_path, "tiny-gpu-stall-2gpu")
    profile = _profile(tmp_path, one_gpu=False)
    _results, case = _run_stopped(profile, "afd-1a1f", (0, 1), "ffn", out)

    assert "; ffn " in case.failure
    attention = [p for p in case.forensics[0].processes if p.role == "attention" and p.busy_frames]
    assert attention, "no Attention process's stack was read"
    for dump in attention:
        print(f"attention {dump.name} pid {dump.pid} ({dump.mode}): {dump.busy_frames[:5]}")
    telemetry = case.section("telemetry")
    assert {r.role: r.devices for r in telemetry.roles} == {"ffn": [1], "attention": [0]}
