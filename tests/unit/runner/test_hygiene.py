"""Hygiene checks: leftover processes, busy ports, GPU memory against its baseline, files left behind."""

from __future__ import annotations

import os
import socket
from functools import partial

from stand_ins import SLEEPER, UNIT_PORT_BASE, wait_for_log

from afd_e2e.results.model import CheckRecord
from afd_e2e.results.status import Status
from afd_e2e.runner.hygiene import (
    GpuSnapshot,
    check_forced_kill,
    check_gpu_memory,
    check_ports,
    check_processes,
    read_gpu_memory,
    remove_leftover_files,
    shm_entries,
)
from afd_e2e.runner.teardown import TeardownOutcome
from afd_e2e.system.markers import find_marked
from unit.timing import GUARD_S, FakeClock


def test_a_leftover_process_fails_the_check_and_is_killed(run_id, spawn):
    leftover = spawn(SLEEPER)
    wait_for_log(leftover.log_path, "stand-in up")

    result = check_processes(partial(find_marked, run_id))

    assert result.status is Status.FAILED
    assert f"pid {leftover.pid}" in result.detail
    leftover.popen.wait(timeout=GUARD_S)
    assert check_processes(partial(find_marked, run_id)).status is Status.PASSED


def test_a_busy_port_fails_naming_its_holder_and_a_free_one_passes():
    port = UNIT_PORT_BASE + 10
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        clock = FakeClock()
        busy = check_ports([port], "127.0.0.1", settle_s=0.2, clock=clock, sleep=clock.sleep)
    free = check_ports([port], "127.0.0.1", settle_s=0.2, clock=FakeClock(), sleep=no_sleep)

    assert busy.status is Status.FAILED and clock.elapsed >= 0.2  # after the settle time, on the clock given
    assert f"{port} held by pid {os.getpid()}" in busy.detail
    assert free == CheckRecord("ports", Status.PASSED, f"free: {port}")


def test_gpu_memory_is_not_applicable_without_nvml_or_gpus():
    snapshot = read_gpu_memory(())

    assert snapshot.unavailable == "runs on the CPU: no GPU memory to check"  # not NVML's error on a CPU machine
    assert check_gpu_memory(snapshot) == CheckRecord("gpu_memory", Status.SKIPPED, snapshot.unavailable)


def test_gpu_memory_must_return_to_its_baseline():
    baseline = GpuSnapshot({0: 0, 1: 2})
    leaked = GpuSnapshot({0: 0, 1: 8194}, {1: (4242,)})
    settled = GpuSnapshot({0: 3, 1: 2})

    clock = FakeClock()
    failed = check_gpu_memory(baseline, read=lambda _devices: leaked, settle_s=0.1, clock=clock, sleep=clock.sleep)
    passed = check_gpu_memory(baseline, read=lambda _devices: settled, settle_s=0.1, clock=FakeClock(), sleep=no_sleep)

    assert failed.status is Status.FAILED and clock.elapsed >= 0.1
    assert failed.detail == "device 1: 8194 MiB used, 2 MiB before (pids [4242])"
    assert passed == CheckRecord("gpu_memory", Status.PASSED, "back to baseline: device 0: 3 MiB, device 1: 2 MiB")


def test_gpu_memory_that_settles_within_the_window_passes():
    readings = iter([GpuSnapshot({0: 900}), GpuSnapshot({0: 400}), GpuSnapshot({0: 0})])

    clock = FakeClock()
    settled = check_gpu_memory(
        GpuSnapshot({0: 0}), read=lambda _d: next(readings), settle_s=5, clock=clock, sleep=clock.sleep
    )
    assert settled.status is Status.PASSED and 0 < clock.elapsed < 5  # the third reading, inside the window


def no_sleep(seconds: float) -> None:
    raise AssertionError(f"a check that should pass at its first look slept {seconds} s")


def test_forced_kill_is_a_failure():
    forced = check_forced_kill(TeardownOutcome(10.2, frozenset({"ffn"}), ()), 10.0)
    clean = check_forced_kill(TeardownOutcome(0.41, frozenset(), ()), 10.0)

    assert forced == CheckRecord(
        "forced_kill", Status.FAILED, "SIGKILL needed for ffn: still running 10 s after SIGTERM"
    )
    assert clean.status is Status.PASSED and "0.41 s" in clean.detail


def test_leftover_files_of_the_case_are_removed_and_others_left_alone(tmp_path):
    shm = tmp_path / "shm"
    shm.mkdir()
    (shm / "vllm_before_the_case").write_text("")
    before = shm_entries(shm)
    scratch = tmp_path / "scratch" / "case"
    scratch.mkdir(parents=True)
    (scratch / "vllm_dist_1234").write_text("")
    with socket.socket(socket.AF_UNIX) as ipc:
        ipc.bind(str(scratch / "0f6b-ipc"))
    (shm / "vllm_dist_1234-cpushm").write_text("")
    with (shm / "vllm_offload_other_run.mmap").open("w") as held_by_another_process:
        result = remove_leftover_files(scratch, before, shm_dir=shm)

        assert result.status is Status.PASSED
        assert f"2 files (1 sockets) in {scratch}" in result.detail
        assert str(shm / "vllm_dist_1234-cpushm") in result.detail
        assert "not ours (open in other processes)" in result.detail
        assert not scratch.exists()
        assert shm_entries(shm) == {"vllm_before_the_case", "vllm_offload_other_run.mmap"}
        assert not held_by_another_process.closed


def test_nothing_left_behind_passes(tmp_path):
    result = remove_leftover_files(tmp_path / "missing", set(), shm_dir=tmp_path)

    assert result == CheckRecord("leftover_files", Status.PASSED, "nothing left behind")
