"""Agent tags from the hardware, in `buildkite-agent start --tags` form, and the matching rule against profiles."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

from preflight_fixtures import GPU_FIXTURES, H200X2, h200x2_readings

from afd_e2e.buildkite.agent_tags import format_tags, hardware_tags, model_slug, tags_satisfy, unmet_tags
from afd_e2e.cli import main
from afd_e2e.gpu.inventory import build_inventory, cuda_version_text, version_tuple
from afd_e2e.gpu.readings import load_readings
from afd_e2e.profile import load_profile
from repo_paths import REPO

H200_TAGS = "gpu=nvidia-h200,gpus=2,gpu_memory_gib=140,interconnect=nvlink,nvidia_driver=580,cuda=13.0"


def test_versions_read_as_nvml_and_drivers_write_them():
    assert cuda_version_text(13000) == "13.0"
    assert cuda_version_text(12040) == "12.4"
    assert cuda_version_text(13020) == "13.2"
    assert version_tuple("580.159.04") == (580, 159, 4)
    assert version_tuple("595.71.05") > version_tuple("580.0")


def test_the_captured_h200_pair_gives_the_expected_tags():
    assert format_tags(hardware_tags(build_inventory(h200x2_readings()))) == H200_TAGS


def test_the_seeds_pcie_machine_and_an_hgx_h200():
    pcie = hardware_tags(build_inventory(load_readings(GPU_FIXTURES / "rtx6000x8-pcie.json")))
    assert pcie == {
        "gpu": "nvidia-rtx-pro-6000-blackwell-server-edition",
        "gpus": "8",
        "gpu_memory_gib": "95",
        "interconnect": "pcie",
        "nvidia_driver": "595",
        "cuda": "13.2",
    }
    hgx = hardware_tags(build_inventory(load_readings(GPU_FIXTURES / "h200x8-nvswitch.json")))
    assert hgx["interconnect"] == "nvlink" and hgx["gpus"] == "8" and hgx["gpu"] == "nvidia-h200"


def test_a_mixed_machine_names_every_model_and_its_smallest_memory():
    readings = h200x2_readings()
    other = replace(readings.gpus[1], name="NVIDIA H100 80GB HBM3", total_bytes=81559 * 1024 * 1024)
    tags = hardware_tags(build_inventory(replace(readings, gpus=(readings.gpus[0], other))))
    assert tags["gpu"] == "nvidia-h100-80gb-hbm3+nvidia-h200"
    assert tags["gpu_memory_gib"] == "79"


def test_model_slugs():
    assert model_slug("NVIDIA H200") == "nvidia-h200"
    assert model_slug("Tesla V100-SXM2-32GB") == "tesla-v100-sxm2-32gb"


def test_tags_satisfy_like_buildkite_agent_targeting():
    agent = {"queue": "large-model", "gpus": "8", "gpu": "nvidia-h200", "cuda": "13.0"}
    assert tags_satisfy(agent, {"queue": "large-model", "gpus": "8"})
    assert tags_satisfy(agent, {"gpu": "nvidia-h*", "cuda": "*"})
    assert tags_satisfy(agent, {})
    assert not tags_satisfy(agent, {"gpus": "4"})
    assert not tags_satisfy(agent, {"interconnect": "*"})  # "*" still needs the tag
    assert unmet_tags(agent, {"gpus": "4", "queue": "large-model", "nvlink": "yes"}) == {"gpus": "4", "nvlink": "yes"}


def test_shipped_profiles_target_the_machines_they_were_written_for():
    seed = load_profile("qwen3.5-122b-a10b").agent_tags
    pcie8 = hardware_tags(build_inventory(load_readings(GPU_FIXTURES / "rtx6000x8-pcie.json")))
    assert tags_satisfy({**pcie8, "queue": "large-model"}, seed)
    assert not tags_satisfy({**hardware_tags(build_inventory(h200x2_readings())), "queue": "large-model"}, seed)


def test_cli_prints_the_tags_and_json(capsys):
    assert main(["agent-tags", "--readings", str(H200X2 / "pynvml.json")]) == 0
    assert capsys.readouterr().out == H200_TAGS + "\n"
    assert main(["agent-tags", "--json", "--readings", str(GPU_FIXTURES / "h200x8-nvswitch.json")]) == 0
    assert '"gpus": "8"' in capsys.readouterr().out


def test_the_provisioning_script_wraps_the_cli():
    done = subprocess.run(
        [str(REPO / "scripts" / "agent-tags"), "--readings", str(H200X2 / "pynvml.json")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == H200_TAGS + "\n"


def test_pairs_nobody_could_place_tag_unknown_never_pcie():
    """The reported case: topo -m text whose header was mangled used to leave pairs unread and the tag said pcie."""
    nvswitch = load_readings(GPU_FIXTURES / "h200x8-nvswitch.json")
    unplaced = replace(nvswitch, gpus=tuple(replace(g, nvlinks=()) for g in nvswitch.gpus), pairs={})
    assert hardware_tags(build_inventory(unplaced))["interconnect"] == "unknown"
    mp = replace(unplaced, topo_m=(GPU_FIXTURES / "topo" / "p100x3-topo-mp.txt").read_text(encoding="utf-8"))
    assert hardware_tags(build_inventory(replace(mp, gpus=mp.gpus[:3])))["interconnect"] == "unknown"
    refused = replace(unplaced, topo_m=(GPU_FIXTURES / "topo" / "rocm-smi-showtopo-4gpu.txt").read_text("utf-8"))
    assert hardware_tags(build_inventory(refused))["interconnect"] == "unknown"
