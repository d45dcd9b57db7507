"""Process accounting and forensics on the real CPU vLLM (tiny-cpu, cpu-tp1):

- ``afd-e2e run`` killed with SIGKILL mid-bench, then ``afd-e2e cleanup``: nothing of the run is left, the bench
  client included (it carries the run's markers), and ``processes: passed`` says so;
- the agent's credentials (``BUILDKITE_AGENT_ACCESS_TOKEN``, ``BUILDKITE_API_TOKEN``) reach neither the server nor
  the bench client;
- a killed EngineCore: the case's failure is in results.json before the teardown begins, with forensics of the
  processes that survived it (their state and stacks, dumped by py-spy), shown in the annotation.

Run under the engine lock (``flock /tmp/afd-e2e-engine.lock``) like every real-engine module.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import yaml

from afd_e2e.forensics.pyspy import find_pyspy
from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.results.store import results_to_json
from afd_e2e.runner.run import execute_run
from afd_e2e.system.markers import RUN_ID_ENV, find_run
from afd_e2e.system.progress import Progress
from repo_paths import GSM8K_DIR, REPO
from stall_support import bench_processes, engine_core_of

pytestmark = pytest.mark.engine

PORT_BASE = 21300  # this module's block: 21300 (SIGKILL of the runner), 21320 (a killed EngineCore)
PROFILE = load_profile("tiny-cpu")
CREDENTIALS = {"BUILDKITE_AGENT_ACCESS_TOKEN": "agent-token-xyz", "BUILDKITE_API_TOKEN": "api-token-xyz"}


def wait_for(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def long_bench_profile(tmp_path: Path) -> Path:
    """tiny-cpu with cpu-tp1 running smoke and a bench long enough to be caught mid-way (a profile by path)."""
    document = yaml.safe_load((REPO / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text(encoding="utf-8"))
    document["cases"]["cpu-tp1"]["phases"] = ["smoke", "performance"]
    document["workloads"]["bench"].update(num_prompts=400, request_rate=4, warmups=1, repetitions=1)
    document["comparisons"] = {}  # one case
    path = tmp_path / "tiny-cpu-long-bench.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def test_sigkill_of_the_runner_mid_bench_then_cleanup_leaves_nothing_and_no_credential_reached_vllm(
    tiny_model, tmp_path
):
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "afd_e2e", "run", "--profile", str(long_bench_profile(tmp_path))]
    argv += ["--model", str(tiny_model), "--case", "cpu-tp1", "--port-base", str(PORT_BASE), "--out", str(out)]
    env = {**os.environ, **CREDENTIALS, "PYTHONPATH": os.pathsep.join(sys.path)}
    output = (tmp_path / "run.log").open("wb")
    runner = subprocess.Popen(argv, env=env, stdout=output, stderr=subprocess.STDOUT)

    def bench_up() -> list[psutil.Process]:
        assert runner.poll() is None, (tmp_path / "run.log").read_text()
        return bench_processes(PORT_BASE)

    try:
        [bench] = wait_for(bench_up, 240, "the bench client")
        record = json.loads((out / "run-record.json").read_text())
        server = psutil.Process(record["processes"][0]["pid"])
        core = wait_for(lambda: engine_core_of(server.pid), 10, "the EngineCore")
        tree = [server, core, bench]

        for proc in (server, bench):  # what the processes that load model code (and the client) hold
            held = proc.environ()
            assert not set(CREDENTIALS) & set(held), proc
        assert bench.environ()[RUN_ID_ENV] == record["run_id"]  # found again by cleanup

        runner.send_signal(signal.SIGKILL)
        runner.wait(10)
        time.sleep(1.0)
        assert all(p.is_running() for p in tree)  # the runner is gone, its processes are not

        done = subprocess.run(
            [sys.executable, "-m", "afd_e2e", "cleanup", "--out", str(out), "--within", "8"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        if runner.poll() is None:
            runner.kill()

    assert done.returncode == 0, done.stdout + done.stderr
    assert "cleanup processes: passed" in done.stdout, done.stdout
    assert "cleanup leftovers: warned" in done.stdout and f"pid {bench.pid}" in done.stdout, done.stdout
    assert bench_processes(PORT_BASE) == []
    for proc in tree:
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, proc
    servers = [(p["case"], p["name"], p["pid"]) for p in record["processes"]]
    assert find_run(record["run_id"], servers) == []
    assert json.loads((out / "results.json").read_text())["status"] == "interrupted"


class OnDiskAtTeardown(Progress):
    """A quiet progress printer that reads results.json from disk the moment the teardown begins."""

    def __init__(self, out: Path) -> None:
        super().__init__(stream=io.StringIO())
        self.out = out
        self.at_teardown: dict | None = None

    def enter(self, case_id, phase, logs=()):
        if phase == "teardown" and self.at_teardown is None:
            self.at_teardown = json.loads((self.out / "results.json").read_text())["cases"][case_id]
        super().enter(case_id, phase, logs)


@pytest.mark.skipif(find_pyspy() is None, reason="py-spy is not installed (pip install 'py-spy>=0.4.3,<0.5')")
def test_a_killed_engine_core_is_on_record_before_teardown_with_forensics_of_the_survivors(tiny_model, tmp_path):
    plan = build_plan(PROFILE, model_path=str(tiny_model), case_ids=["cpu-tp1"], port_base=PORT_BASE + 20)
    plan = dataclasses.replace(plan, cases=(dataclasses.replace(plan.cases[0], phases=("performance",)),))
    killed: dict[str, int] = {}

    def kill_engine_mid_bench() -> None:
        bench_processes_up = wait_for(lambda: bench_processes(PORT_BASE + 20), 240, "the bench client")
        record = json.loads((tmp_path / "run-record.json").read_text())
        core = wait_for(lambda: engine_core_of(record["processes"][0]["pid"]), 10, "the EngineCore")
        assert bench_processes_up
        time.sleep(1.0)
        killed["engine"], killed["server"] = core.pid, record["processes"][0]["pid"]
        core.kill()

    killer = threading.Thread(target=kill_engine_mid_bench, daemon=True)
    killer.start()
    progress = OnDiskAtTeardown(tmp_path)
    results = execute_run(PROFILE, plan, tmp_path, progress=progress, gsm8k_dir=GSM8K_DIR)
    data = results_to_json(results)
    case = data["cases"]["cpu-tp1"]

    assert killed, "the EngineCore was never killed"
    assert case["status"] == "failed" and "engine died during performance" in case["failure"]
    on_disk = progress.at_teardown
    assert on_disk is not None and on_disk["status"] == "failed" and on_disk["failure"] == case["failure"]
    [taken] = on_disk["forensics"]  # also taken before the teardown
    assert taken["trigger"] == "death" and taken["reason"] == case["failure"] and taken["seconds"] < 10
    dumps = {d["pid"]: d for d in taken["processes"]}
    server = dumps[killed["server"]]
    assert server["role"] == "server" and server["mode"] in ("native", "python"), server
    assert server["busy_frames"] and server["busy_thread"]
    assert killed["engine"] not in dumps or dumps[killed["engine"]]["status"] == "zombie"
    text = (tmp_path / server["path"]).read_text()
    assert f"pid {killed['server']}" in text and "state: " in text and "Thread " in text
    annotation = (tmp_path / "annotation.md").read_text()
    assert "### Forensics" in annotation and f"artifact://{server['path']}" in annotation
    assert data["verdict"]["status"] == "failed"
