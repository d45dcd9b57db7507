"""NVML readings: the JSON shape of the captures, and the live probe's code run against replayed captures."""

from __future__ import annotations

from dataclasses import replace

import pytest
from preflight_fixtures import GPU_FIXTURES, H200X2, h200x2_readings

from afd_e2e.errors import UsageError
from afd_e2e.gpu.machine_probe import read_machine
from afd_e2e.gpu.nvml import NvmlUnavailable
from afd_e2e.gpu.readings import PairReading, load_readings, readings_from_json, readings_to_json
from afd_e2e.gpu.recorded import ReplayNvml


def test_the_h200_capture_reads_as_two_gpus_with_18_active_links_whose_far_end_is_unnamed():
    readings = load_readings(H200X2 / "pynvml.json")
    assert readings.driver == "580.159.04"
    assert readings.cuda_driver == 13000
    assert [g.name for g in readings.gpus] == ["NVIDIA H200", "NVIDIA H200"]
    assert [g.bus_id for g in readings.gpus] == ["0000:00:06.0", "0000:00:07.0"]
    assert readings.gpus[0].total_bytes == 150754820096
    assert readings.gpus[0].reserved_bytes is None  # captured with NVML v1 memory info only
    links = readings.gpus[1].nvlinks
    assert len(links) == 18 and all(ln.active and ln.remote_bus_id is None for ln in links)
    assert readings.pair(1, 0) == PairReading(common_ancestor=30, p2p_nvlink=0)


def test_json_round_trip_keeps_every_reading():
    for path in (H200X2 / "pynvml.json", *sorted(GPU_FIXTURES.glob("*.json"))):
        readings = load_readings(path)
        assert readings_from_json(readings_to_json(readings)) == readings, path.name


def test_the_probe_reads_a_replayed_capture_back_unchanged_in_one_pass():
    readings = h200x2_readings()
    replay = ReplayNvml(readings)
    assert read_machine(replay.session, replay.topo_m) == readings
    # 2 GPUs x (name, uuid, pci, memory, processes, 18 x (state, remote type, remote pci) + the 19th state) + pairs
    assert replay.calls < 140


def test_memory_without_nvml_v2_falls_back_to_v1_used():
    readings = h200x2_readings(with_reserved=False)
    replay = ReplayNvml(readings)
    machine = read_machine(replay.session, replay.topo_m)
    assert machine.gpus[0].reserved_bytes is None
    assert machine.gpus[0].used_bytes == 644939776


def test_nvidia_smi_topo_runs_once_only_when_nvml_cannot_place_a_pair():
    calls = []

    def topo_m() -> str:
        calls.append(1)
        return (GPU_FIXTURES / "topo" / "pcie8-pix-pxb-sys-mlx5.txt").read_text(encoding="utf-8")

    placed = load_readings(GPU_FIXTURES / "rtx6000x8-pcie.json")
    assert read_machine(ReplayNvml(placed).session, topo_m).topo_m is None
    assert calls == []

    unplaced = replace(placed, pairs={})
    machine = read_machine(ReplayNvml(unplaced).session, topo_m)
    assert calls == [1]
    assert machine.topo_m is not None and "GPU7" in machine.topo_m


def test_a_failing_topo_fallback_leaves_the_readings_without_it():
    def broken() -> str:
        raise NvmlUnavailable("nvidia-smi is not on PATH")

    unplaced = replace(load_readings(GPU_FIXTURES / "rtx6000x8-pcie.json"), pairs={})
    assert read_machine(ReplayNvml(unplaced).session, broken).topo_m is None


def test_a_machine_whose_nvml_cannot_list_gpus_is_unavailable():
    replay = ReplayNvml(replace(h200x2_readings(), driver=None))
    with pytest.raises(NvmlUnavailable, match="cannot read the GPUs"):
        read_machine(replay.session, replay.topo_m)


def test_a_file_that_is_not_readings_is_a_usage_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"gpus": "nope"}', encoding="utf-8")
    with pytest.raises(UsageError, match="not NVML readings"):
        load_readings(bad)
    with pytest.raises(UsageError, match="capture-gpu-fixtures"):
        load_readings(tmp_path / "missing.json")
