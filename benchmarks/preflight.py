"""Preflight's hardware part (read the machine, derive the inventory and link matrix, run the GPU checks): wall time
for 8 GPUs against a naive prober that runs nvidia-smi once per GPU, in the same invocation. Target: < 2 s for 8 GPUs
and no nvidia-smi subprocess per GPU.

    PYTHONPATH=python python benchmarks/preflight.py [--repeats N]

Without a GPU both sides run on the simulated 8-GPU machines of tests/fixtures/gpu/: ours replays the recorded NVML
readings through the live probe code (and, for the topo -m fallback machine, runs a stand-in `nvidia-smi` once);
the naive prober runs the stand-in per GPU (`-q -x -i N` and `topo -m`). The stand-in only prints recorded text, so
it is far cheaper than a real nvidia-smi (which initialises NVML on every run): the simulated ratio understates the
real one. With a GPU, both sides also run on the real GPUs with the real nvidia-smi.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from functools import partial
from pathlib import Path

from afd_e2e.gpu.inventory import build_inventory
from afd_e2e.gpu.machine_probe import read_machine
from afd_e2e.gpu.nvml import NvmlUnavailable
from afd_e2e.gpu.readings import MachineReadings, load_readings
from afd_e2e.gpu.recorded import ReplayNvml
from afd_e2e.gpu.smi import read_topo_m, run_topo_m
from afd_e2e.phases import builtin
from afd_e2e.plan import build_plan
from afd_e2e.preflight.run_checks import hardware_checks
from afd_e2e.profile import Profile, load_profile

builtin.install_phases()  # the built-in phases, which reading a profile needs (as cli.main installs them)

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "gpu"
TEST_PROFILE = REPO / "tests" / "fixtures" / "profiles" / "h200x2-nvlink.yaml"
SEED_DEVICES = (0, 2, 4, 6, 1, 3, 5, 7)
TARGET_S = 2.0
FAKE_SMI = """#!/bin/sh
case "$*" in
  "topo -m") exec cat "{topo}" ;;
  *"-q -x"*) exec cat "{xml}" ;;
  *) echo "stand-in nvidia-smi: $*" >&2; exit 2 ;;
esac
"""


def ours(profile: Profile, devices: tuple[int, ...], read: Callable[[], MachineReadings]) -> int:
    """Preflight's hardware part; returns the number of checks made."""
    plan = build_plan(profile, model_path="/m", devices=devices)
    inventory = build_inventory(read())
    return len(hardware_checks(profile, plan, inventory, ""))


def naive(gpus: int) -> int:
    """One `nvidia-smi -q -x -i N` and one `nvidia-smi topo -m` per GPU: the prober preflight replaces."""
    links = 0
    for index in range(gpus):
        xml = subprocess.run(["nvidia-smi", "-q", "-x", "-i", str(index)], capture_output=True, text=True, check=True)
        gpu = ET.fromstring(xml.stdout).find("gpu")
        assert gpu is not None and gpu.findtext("fb_memory_usage/total")
        topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, check=True)
        links += sum(1 for a, b in read_topo_m(topo.stdout).cells if index in (a, b))
    return links


def timed(label: str, action: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    median = statistics.median(samples)
    print(f"  {label:<66} median {median * 1000:8.1f} ms  (min {min(samples) * 1000:.1f}, n={repeats})")
    return median


def simulated(repeats: int) -> None:
    print("simulated 8 GPUs (recorded readings; stand-in nvidia-smi)")
    with tempfile.TemporaryDirectory() as tmp:
        smi = Path(tmp) / "nvidia-smi"
        xml = FIXTURES / "h200x2-captured" / "nvidia-smi-q.xml"
        smi.write_text(
            FAKE_SMI.format(topo=FIXTURES / "topo" / "pcie8-pix-pxb-sys-mlx5.txt", xml=xml), encoding="utf-8"
        )
        smi.chmod(0o755)
        path = os.environ["PATH"]
        os.environ["PATH"] = f"{tmp}{os.pathsep}{path}"
        try:
            results = {}
            seed = load_profile("qwen3.5-122b-a10b")
            for name in ("rtx6000x8-pcie.json", "h200x8-nvswitch.json", "rtx6000x8-pcie-smi-fallback.json"):
                readings = load_readings(FIXTURES / name)
                replay = ReplayNvml(readings)
                fallback = readings.topo_m is not None
                read = partial(read_machine, replay.session, run_topo_m)
                label = f"preflight hardware, {name}" + (" (1 topo -m)" if fallback else "")
                results[name] = timed(label, partial(ours, seed, SEED_DEVICES, read), repeats)
                print(f"  {'':<66} {replay.calls // repeats} NVML calls, {int(fallback)} nvidia-smi run(s)")
            baseline = timed("naive: 2 stand-in nvidia-smi runs per GPU (16 runs)", lambda: naive(8), repeats)
        finally:
            os.environ["PATH"] = path
    worst = max(results.values())
    print(
        f"  slowest of ours {worst * 1000:.1f} ms vs naive {baseline * 1000:.1f} ms: {baseline / worst:.1f}x faster;"
        f" target < {TARGET_S:.0f} s: {'met' if worst < TARGET_S else 'MISSED'}"
    )


def real(repeats: int) -> None:
    try:
        count = len(read_machine().gpus)
    except NvmlUnavailable as exc:
        print(f"real GPUs: none here ({exc})")
        return
    print(f"real GPUs: {count}")
    # The seed profile on 8 GPUs; on fewer, the 2-GPU test profile (same checks, fewer devices).
    profile_arg, devices = ("qwen3.5-122b-a10b", SEED_DEVICES) if count >= 8 else (str(TEST_PROFILE), (0, 1))
    profile = load_profile(profile_arg)
    ours_s = timed(
        f"preflight hardware, live NVML, {profile.name}", partial(ours, profile, devices, read_machine), repeats
    )
    if shutil.which("nvidia-smi") is None:
        print("  no nvidia-smi on PATH: naive prober not run")
        return
    naive_s = timed(f"naive: 2 real nvidia-smi runs per GPU ({2 * count} runs)", partial(naive, count), repeats)
    print(
        f"  ours {ours_s * 1000:.1f} ms vs naive {naive_s * 1000:.1f} ms: {naive_s / ours_s:.1f}x faster;"
        f" target < {TARGET_S:.0f} s: {'met' if ours_s < TARGET_S else 'MISSED'}"
    )
    cli = [sys.executable, "-m", "afd_e2e", "preflight", "--profile", profile_arg, "--port-base", "20500"]
    cli += ["--devices", ",".join(map(str, devices))]
    timed("whole `afd-e2e preflight` process (all checks)", partial(subprocess.run, cli, capture_output=True), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    simulated(args.repeats)
    real(args.repeats)


if __name__ == "__main__":
    main()
