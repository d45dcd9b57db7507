"""A real capacity sweep on the tiny DeepSeek-V2 (CUDA vLLM 0.26 + the AFD plugin): native DP1 on one GPU, then
native vs AFD 1A1F on two GPUs (equal hardware: native DP2/EP2; per GPU: native DP1), through ``afd-e2e run``.

Both runs use tiny-gpu-1a1f's own capacity section (its sweep, SLO and budgets), its cases cut to smoke and
capacity. Skips, with the reason, without the GPUs, a CUDA vLLM, the AFD plugin or ``AFD_GPU_E2E_MODEL``.
``AFD_E2E_GPU_CAPACITY_OUT`` keeps the results folders (``<dir>/tiny-gpu-capacity-1gpu``, ``<dir>/tiny-gpu-capacity-2gpu``) to commit
as fixtures (``tests/fixtures/results``: keep results.json, annotation.md, plots/ and junit/).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from afd_e2e.results import load_results
from afd_e2e.results.status import Status
from gpu_agent import REPO, why_not_gpus, why_not_two_gpu_afd

pytestmark = pytest.mark.gpu

PROFILE = REPO / "python/afd_e2e/profiles/tiny-gpu-1a1f.yaml"


def _why_not_one_gpu() -> str | None:
    if reason := why_not_gpus(1):
        return reason
    if not os.environ.get("AFD_GPU_E2E_MODEL"):
        return "AFD_GPU_E2E_MODEL is not set"
    return None


def _out(tmp_path_factory, name: str) -> Path:
    kept = os.environ.get("AFD_E2E_GPU_CAPACITY_OUT")
    return Path(kept) / name if kept else tmp_path_factory.mktemp(name)


def _run(document: dict, work: Path, out: Path, devices: str) -> int:
    profile = work / f"{document['name']}.yaml"
    profile.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    pythonpath = os.pathsep.join(filter(None, [str(REPO / "python"), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "AFD_E2E_BACKEND": "gpu", "AFD_E2E_DEVICES": devices}
    command = [sys.executable, "-m", "afd_e2e", "run", "--profile", str(profile), "--out", str(out)]
    return subprocess.run(command, env=env, timeout=1800, check=False).returncode


def _capacity_only(document: dict) -> dict:
    for case in document["cases"].values():
        case["phases"] = ["smoke", "capacity"]
    document["workloads"].pop("gsm8k", None)
    document["comparisons"] = {k: v for k, v in document["comparisons"].items() if "capacity" in v["measures"]}
    for comparison in document["comparisons"].values():
        comparison["measures"] = ["capacity"]
    return document


@pytest.fixture(scope="module")
def one_gpu(tmp_path_factory):
    if reason := _why_not_one_gpu():
        pytest.skip(reason)
    document = _capacity_only(yaml.safe_load(PROFILE.read_text(encoding="utf-8")))
    document["name"] = "tiny-gpu-capacity-1gpu"
    document["hardware"]["gpus"] = 1
    document["agent_tags"]["gpus"] = "1"
    document["devices"] = {"count": 1, "default": [0], "groups": {"attention": [0, 1]}}
    document["cases"] = {"native-dp1": document["cases"]["native-dp1"]}
    document["comparisons"] = {}
    out = _out(tmp_path_factory, "tiny-gpu-capacity-1gpu")
    _run(document, tmp_path_factory.mktemp("one-gpu-profile"), out, "0")
    return out


@pytest.fixture(scope="module")
def two_gpus(tmp_path_factory):
    if reason := why_not_two_gpu_afd("AFD_GPU_E2E_MODEL"):
        pytest.skip(reason)
    document = _capacity_only(yaml.safe_load(PROFILE.read_text(encoding="utf-8")))
    document["name"] = "tiny-gpu-capacity"
    out = _out(tmp_path_factory, "tiny-gpu-capacity-2gpu")
    _run(document, tmp_path_factory.mktemp("two-gpu-profile"), out, "0,1")
    return out


def _swept(out: Path, case_id: str):
    section = load_results(out).case(case_id).section("capacity")
    assert section is not None, f"{case_id} recorded no capacity sweep"
    print(case_id, section.estimate.text if section.estimate else section.failure)
    assert section.status is Status.PASSED, section.failure
    assert len(section.grid) >= 3 and section.levels  # the profile's grid; the search measures part of it
    assert all(lv.attainment is not None for lv in section.levels if lv.status is Status.PASSED)
    est = section.estimate
    if est is not None and est.interval is not None:  # the 12-05 H200 run's excluded its estimate (issue 49)
        assert est.interval[0] <= est.capacity <= est.interval[1], est
    return section


def test_native_on_one_gpu_sweeps_and_plots(one_gpu):
    section = _swept(one_gpu, "native-dp1")
    assert section.gpus == 1
    assert (one_gpu / "plots" / "capacity-native-dp1.png").stat().st_size > 20_000
    assert "### Capacity at SLO" in (one_gpu / "annotation.md").read_text(encoding="utf-8")


def test_native_vs_afd_1a1f_on_two_gpus_equal_hardware_and_per_gpu(two_gpus):
    results = load_results(two_gpus)
    for case_id, gpus in (("native-dp1", 1), ("afd-1a1f", 2), ("native-dp2-ep2", 2)):
        assert _swept(two_gpus, case_id).gpus == gpus
    equal = results.comparisons["capacity"].section("capacity")
    per_gpu = results.comparisons["capacity-per-gpu"].section("capacity")
    print(equal, per_gpu, sep="\n")
    assert not equal.per_gpu and per_gpu.per_gpu and per_gpu.unit.endswith("per GPU")
    assert equal.common_levels and per_gpu.common_levels
    for cap in (equal, per_gpu):
        assert cap.ci95_pct is None or cap.ci95_pct[0] <= cap.delta_pct <= cap.ci95_pct[1], cap
    for key in ("capacity", "capacity-per-gpu"):
        assert (two_gpus / "plots" / f"capacity-{key}.png").stat().st_size > 20_000
