"""GPU-memory hygiene on a real NVIDIA GPU: a CUDA process's memory fails the check until it is stopped."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from functools import partial

import pytest

from afd_e2e.gpu.memory import NvmlUnavailable, read_device_memory
from afd_e2e.runner.hygiene import check_gpu_memory, read_gpu_memory
from afd_e2e.runner.teardown import terminate
from afd_e2e.system.markers import find_marked, marker_env, new_run_id

pytestmark = pytest.mark.gpu

HOLDS_ONE_GIB = (
    "import sys, time, torch; x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda:0'); "
    "torch.cuda.synchronize(); print('holding', flush=True); time.sleep(600)"
)


@pytest.fixture
def gpu0():
    try:
        read_device_memory([0])
    except NvmlUnavailable as exc:
        pytest.skip(f"no NVIDIA GPU here: {exc}")
    pytest.importorskip("torch")


def test_memory_held_by_a_cuda_process_fails_until_it_is_stopped(gpu0):
    baseline = read_gpu_memory([0])
    run_id = new_run_id()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDS_ONE_GIB],
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "0", **marker_env(run_id, "gpu", "holder")},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        held = check_gpu_memory(baseline, settle_s=0.5)
        outcome = terminate(partial(find_marked, run_id), grace_s=10)
        started = time.monotonic()
        released = check_gpu_memory(baseline)
    finally:
        holder.kill()
        holder.wait()

    assert held.status == "failed"
    assert held.detail.startswith("device 0: ")
    assert not outcome.forced
    assert released.status == "passed", released.detail
    assert time.monotonic() - started < 5
