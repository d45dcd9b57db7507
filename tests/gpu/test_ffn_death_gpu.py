"""An AFD case whose FFN engine dies after launch, on real GPUs (tiny-gpu-1a1f: a tiny DeepSeek-V2 on vLLM 0.26 +
the AFD plugin, Attention on GPU 0, FFN on GPU 1): the FFN's ``VLLM::EngineCore`` is killed while its API process
stays up, once mid-bench and once during start-up. The case must fail within 5 s, name the FFN role and quote the
cause from the FFN's own log (not the Attention's start-up timeout), and leave nothing running.

Run on the GPU machine after ``. /tmp/vl/env.sh`` (``vllm`` on PATH, the kit on PYTHONPATH):

    AFD_GPU_E2E_MODEL=/tmp/vl/tiny-dsv2 PYTHONPATH=python:$PYTHONPATH \\
        python3 -m pytest tests/gpu/test_ffn_death_gpu.py -v -s -m gpu

It skips, with the reason, without 2 NVIDIA GPUs, a ``vllm`` executable or the checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from pathlib import Path

import psutil
import pytest

from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.results.status import Status
from afd_e2e.runner.run import execute_run
from afd_e2e.system.markers import find_marked
from afd_e2e.system.progress import Progress
from gpu_agent import why_not_gpus, why_not_kit

pytestmark = pytest.mark.gpu

MODEL = os.environ.get("AFD_GPU_E2E_MODEL", "/tmp/vl/tiny-dsv2")
DETECTION_LIMIT_S = 5.0


def _why_not() -> str | None:
    return why_not_gpus(2) or why_not_kit(MODEL)


REASON = _why_not()
if REASON:
    pytest.skip(REASON, allow_module_level=True)

# GSM8K is not this test's subject: without it the run needs no staged dataset.
PROFILE = dataclasses.replace(load_profile("tiny-gpu-1a1f"), gsm8k=None)


class PhaseClock(Progress):
    """The runner's progress printer, echoing to the terminal, noting when each phase began (monotonic)."""

    def __init__(self) -> None:
        super().__init__()
        self.began: dict[str, float] = {}

    def enter(self, case_id, phase, logs=()):
        self.began.setdefault(phase, time.monotonic())
        super().enter(case_id, phase, logs)


def ffn_engine_core(out: Path) -> psutil.Process | None:
    """The FFN role's ``VLLM::EngineCore``, once the FFN has been launched and has spawned it."""
    record = out / "run-record.json"
    if not record.exists():
        return None
    ffn = [p for p in json.loads(record.read_text())["processes"] if p["name"] == "ffn"]
    if not ffn:
        return None
    try:
        children = psutil.Process(ffn[0]["pid"]).children(recursive=True)
    except psutil.Error:
        return None
    for child in children:
        try:
            title = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if "EngineCore" in title:
            return child
    return None


def kill_ffn_engine_when(out: Path, ready) -> dict[str, float]:
    seen: dict[str, float] = {}

    def run() -> None:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            core = ffn_engine_core(out)
            if core is not None and ready():
                core.kill()
                seen["killed"] = time.monotonic()
                return
            time.sleep(0.05)

    threading.Thread(target=run, daemon=True).start()
    return seen


def afd_case_plan(phases: tuple[str, ...]):
    plan = build_plan(PROFILE, model_path=MODEL, devices=(0, 1), case_ids=["afd-1a1f"])
    return dataclasses.replace(plan, cases=(dataclasses.replace(plan.cases[0], phases=phases),))


def check_ffn_failure(out: Path, results, clock: PhaseClock, killed: dict[str, float], phase: str) -> None:
    case = results.cases["afd-1a1f"]
    print(f"\nfailure: {case.failure}\nhygiene: {[(c.check, str(c.status), c.detail) for c in case.hygiene]}")
    assert "killed" in killed, "the FFN's EngineCore was never found"
    assert case.status is Status.FAILED
    assert case.failure.startswith("ffn "), case.failure
    assert f"during {phase}" in case.failure
    assert clock.began["teardown"] - killed["killed"] < DETECTION_LIMIT_S
    cause = case.failure.split("after launch): ", 1)[-1].split("after launch: ", 1)[-1]
    assert cause and cause in (out / "logs" / "afd-1a1f" / "ffn.log").read_text(errors="replace")
    assert find_marked(results.run_id) == []


def test_an_ffn_engine_killed_mid_bench_fails_the_case_within_seconds_with_the_ffns_error(tmp_path):
    clock = PhaseClock()
    bench_dir = tmp_path / "bench" / "afd-1a1f"
    killed = kill_ffn_engine_when(tmp_path, lambda: any(p.stat().st_size for p in bench_dir.glob("*.log")))

    results = execute_run(PROFILE, afd_case_plan(("performance",)), tmp_path, progress=clock)

    check_ffn_failure(tmp_path, results, clock, killed, "performance")
    assert results.cases["afd-1a1f"].section(PERFORMANCE).status is Status.FAILED


def test_an_ffn_engine_killed_during_startup_fails_the_case_within_seconds_naming_the_ffn(tmp_path):
    clock = PhaseClock()
    killed = kill_ffn_engine_when(tmp_path, lambda: True)  # as soon as it exists: the model is still loading

    results = execute_run(PROFILE, afd_case_plan(("smoke",)), tmp_path, progress=clock)

    check_ffn_failure(tmp_path, results, clock, killed, "start-up")
