"""Forensics on a real GPU engine (CUDA vLLM 0.26, tiny DeepSeek-V2, native DP1 on one GPU, through ``afd-e2e run``):

1. mid-bench, the case's ``VLLM::EngineCore`` is stopped (SIGSTOP): every process of the case is dumped by the
   product's own capture (``forensics.capture_processes``): the stopped EngineCore with ``--nonblocking`` (the
   default mode fails "Failed to suspend process" there), the others with native frames, all within 10 s;
2. then it is killed (SIGKILL): the run finds the death, records the failure before the teardown and takes the
   forensics of the survivors into results.json (``forensics/<case>/<role>-<pid>.txt``), shown in the annotation.

    AFD_GPU_E2E_MODEL=/tmp/vl/tiny-dsv2 AFD_E2E_GPU_OUT=/tmp/forensics-out \\
        python3 -m pytest tests/gpu/test_forensics_gpu.py -k one_gpu -v -s

``AFD_E2E_GPU_OUT`` keeps the results folder (``<dir>/tiny-gpu-forensics-1gpu``: results.json, annotation.md,
forensics/, and ``stopped/`` with the dumps of step 1) to commit as fixtures. Skips, with the reason, without an
NVIDIA GPU, ``AFD_GPU_E2E_MODEL`` or py-spy.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from afd_e2e.forensics import capture_processes
from afd_e2e.forensics.pyspy import find_pyspy
from afd_e2e.results import load_results
from afd_e2e.results.codec import to_json
from afd_e2e.results.status import Status
from afd_e2e.system.process_state import case_processes
from gpu_agent import REPO, why_not_gpus
from stall_support import engine_core_of

pytestmark = pytest.mark.gpu

PROFILE = REPO / "python/afd_e2e/profiles/tiny-gpu-1a1f.yaml"
NAME = "tiny-gpu-forensics-1gpu"


def _why_not_one_gpu() -> str | None:
    if reason := why_not_gpus(1):
        return reason
    if not os.environ.get("AFD_GPU_E2E_MODEL"):
        return "AFD_GPU_E2E_MODEL is not set"
    if find_pyspy() is None:
        return "py-spy is not installed (pip install 'py-spy>=0.4.3,<0.5')"
    return None


def _one_gpu_profile(work: Path) -> Path:
    document = yaml.safe_load(PROFILE.read_text(encoding="utf-8"))
    document["name"] = "tiny-gpu-forensics-1gpu"
    document["hardware"]["gpus"] = 1
    document["agent_tags"]["gpus"] = "1"
    document["devices"] = {"count": 1, "default": [0], "groups": {"attention": [0, 1]}}
    document["cases"] = {"native-dp1": {**document["cases"]["native-dp1"], "phases": ["smoke", "performance"]}}
    document["comparisons"] = {}
    document["workloads"].pop("gsm8k", None)
    document["workloads"].pop("capacity", None)
    document["workloads"]["bench"].update(num_prompts=2000, request_rate=8, warmups=1, repetitions=1)
    path = work / f"{document['name']}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def _bench_running(out: Path) -> bool:
    folder = out / "bench" / "native-dp1"
    return folder.exists() and any(log.stat().st_size > 0 for log in folder.glob("*.log"))


def _stop_dump_then_kill(out: Path, seen: dict) -> None:
    """Once the bench runs: SIGSTOP the EngineCore, dump every process of the case, SIGKILL the EngineCore."""
    deadline = time.monotonic() + 1200
    while time.monotonic() < deadline:
        record = out / "run-record.json"
        processes = json.loads(record.read_text())["processes"] if record.exists() else []
        core = engine_core_of(processes[0]["pid"]) if processes else None
        if core is not None and _bench_running(out):
            time.sleep(3.0)  # requests in flight
            server = processes[0]["pid"]
            core.send_signal(signal.SIGSTOP)
            time.sleep(0.5)
            started = time.monotonic()
            taken = capture_processes(
                case_processes([("server", server)]),
                case_id="native-dp1",
                trigger="stall",
                reason="EngineCore stopped by the test (SIGSTOP)",
                out_dir=out / "stopped",
            )
            seen.update(server=server, core=core.pid, stopped=taken, stopped_s=time.monotonic() - started)
            core.send_signal(signal.SIGKILL)
            return
        time.sleep(0.1)


@pytest.fixture(scope="module")
def one_gpu_run(tmp_path_factory):
    if reason := _why_not_one_gpu():
        pytest.skip(reason)
    kept = os.environ.get("AFD_E2E_GPU_OUT")
    out = Path(kept) / NAME if kept else tmp_path_factory.mktemp(NAME)
    profile = _one_gpu_profile(tmp_path_factory.mktemp("one-gpu-profile"))
    pythonpath = os.pathsep.join(filter(None, [str(REPO / "python"), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "AFD_E2E_BACKEND": "gpu", "AFD_E2E_DEVICES": "0"}
    seen: dict = {}
    watcher = threading.Thread(target=_stop_dump_then_kill, args=(out, seen), daemon=True)
    watcher.start()
    command = [sys.executable, "-m", "afd_e2e", "run", "--profile", str(profile), "--out", str(out)]
    returncode = subprocess.run(command, env=env, timeout=1800, check=False).returncode
    watcher.join(5)
    if "stopped" in seen:
        (out / "stopped" / "forensics.json").write_text(json.dumps(to_json(seen["stopped"]), indent=2))
    return out, returncode, seen


def _native(frames: list[str]) -> bool:
    """A native frame names a shared object or a binary: ``epoll_wait (libc.so.6)``."""
    return any(".so" in frame or "(python" in frame for frame in frames)


def test_one_gpu_a_stopped_engine_core_is_dumped_nonblocking_and_the_others_with_native_frames(one_gpu_run):
    _out, _code, seen = one_gpu_run
    assert "stopped" in seen, "the EngineCore was never stopped mid-bench"
    taken = seen["stopped"]
    print(json.dumps(to_json(taken), indent=1)[:4000])
    assert seen["stopped_s"] < 10.0 and taken.seconds < 10.0
    dumps = {d.pid: d for d in taken.processes}
    core = dumps[seen["core"]]
    assert core.status == "stopped" and core.mode == "nonblocking" and core.busy_frames, core
    server = dumps[seen["server"]]
    assert server.mode == "native" and server.busy_frames, server
    others = [d for d in taken.processes if d.pid != seen["core"] and d.mode]
    assert any(_native((Path(_out) / "stopped" / d.path).read_text().splitlines()) for d in others if d.path)


def test_one_gpu_a_killed_engine_core_fails_the_case_with_forensics_of_the_survivors(one_gpu_run):
    out, returncode, seen = one_gpu_run
    assert "core" in seen
    results = load_results(out)
    case = results.cases["native-dp1"]
    print(case.failure)
    assert returncode == 1 and case.status is Status.FAILED
    assert "engine died during performance" in case.failure or "exited with code" in case.failure, case.failure
    [taken] = case.forensics
    assert taken.trigger == "death" and taken.seconds < 10.0
    # vLLM 0.26's API server shuts itself down once its EngineCore dies: by the dump it may already have exited
    # (seen on the H200: a zombie). Every process is either dumped with its frames or named with the reason.
    server = next(d for d in taken.processes if d.pid == seen["server"])
    for dump in taken.processes:
        assert (dump.mode in ("native", "python", "nonblocking") and dump.busy_frames) or dump.failure, dump
    if server.mode is None:
        assert server.status == "zombie" and "exited" in server.failure, server
    assert (out / server.path).is_file()
    assert "### Forensics" in (out / "annotation.md").read_text(encoding="utf-8")
    hygiene = {c.check: c.status for c in case.hygiene}
    assert hygiene["processes"] is Status.PASSED, case.hygiene
