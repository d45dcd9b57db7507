"""``afd-e2e run`` refuses GPUs that are not idle (preflight's check and words, naming the pid) unless
``--allow-busy-gpus``, which the results and the annotation then show."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from afd_e2e.errors import UsageError
from afd_e2e.gpu.readings import ProcessReading, load_readings
from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.report.annotation import render_annotation
from afd_e2e.results.store import results_from_json
from afd_e2e.runner.busy_gpus import busy_gpus, refuse_busy_gpus
from repo_paths import FIXTURES, SHARED

MIB = 1024 * 1024
PROFILE = load_profile(str(FIXTURES / "profiles" / "h200x2-nvlink.yaml"))
PLAN = build_plan(PROFILE, model_path="/models/m", devices=(0, 1))


def readings_with_gpu1_held_by_this_process():
    readings = load_readings(SHARED / "fixtures" / "gpu" / "h200x2" / "pynvml.json")
    held = 2048 * MIB
    gpu1 = replace(
        readings.gpus[1], used_bytes=readings.gpus[1].used_bytes + held, processes=(ProcessReading(os.getpid(), held),)
    )
    return replace(readings, gpus=(readings.gpus[0], gpu1))


def test_a_gpu_another_process_holds_is_refused_naming_the_pid_unless_allowed():
    busy = busy_gpus(PROFILE, PLAN, read_hardware=readings_with_gpu1_held_by_this_process)

    assert [check.name for check in busy] == ["idle GPU1"]
    with pytest.raises(UsageError) as caught:
        refuse_busy_gpus(busy, allow=False)
    message = str(caught.value)
    assert message.startswith("idle GPU1: ") and f"pid {os.getpid()} (" in message
    assert f"kill {os.getpid()}" in message and "--allow-busy-gpus" in message
    refuse_busy_gpus(busy, allow=True)  # allowed: no error


def test_idle_gpus_and_the_cpu_are_never_refused():
    idle = load_readings(SHARED / "fixtures" / "gpu" / "h200x2" / "pynvml.json")
    assert busy_gpus(PROFILE, PLAN, read_hardware=lambda: idle) == []
    cpu = load_profile("tiny-cpu")
    assert busy_gpus(cpu, build_plan(cpu, model_path="/m"), read_hardware=lambda: idle) == []


def test_a_run_on_busy_gpus_says_so_in_the_annotation():
    data = results_from_json(json.loads((FIXTURES / "results" / "tiny-gpu-1a1f" / "results.json").read_text()))
    shown = replace(data, busy_gpus=["idle GPU1: 2048 MiB used by pid 42 (python) holding 2048 MiB"])

    annotation = render_annotation(shown).body

    assert (
        "**Busy GPUs** (run with `--allow-busy-gpus`): idle GPU1\\: 2048 MiB used by pid 42 \\(python\\)" in annotation
    )
    assert "Busy GPUs" not in render_annotation(data).body
