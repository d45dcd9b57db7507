"""Process accounting and forensics on the real CPU vLLM (tiny-cpu, cpu-tp1):

- ``afd-e2e run`` killed with SIGKILL mid-bench, then ``afd-e2e cleanup``: nothing of the run is left, the warm
  bench client and the command it forked included (both carry the run's markers), and ``processes: passed`` says so;
- the agent's credentials (``BUILDKITE_AGENT_ACCESS_TOKEN``, ``BUILDKITE_API_TOKEN``) reach neither the server nor
  the bench client.

One vLLM launch (the runner killed under it). A killed EngineCore's failure on record before the teardown, with
forensics of the survivors, is checked on the mid-bench death of ``test_engine_death_cpu_vllm.py`` (one launch for
both). Run under the engine lock (``flock /tmp/afd-engine.lock``) like every real-engine module.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from afd_e2e.profile import load_profile
from afd_e2e.system.markers import RUN_ID_ENV, find_run
from repo_paths import REPO
from stall_support import bench_processes, engine_core_of

LAUNCHES = 1  # the most vLLM servers this module starts (tests/launch_counter.py): the run killed with SIGKILL under it

pytestmark = pytest.mark.engine

PORT_BASE = 21300  # this module's port: 21300 (SIGKILL of the runner)
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
        """The warm bench client and the child it forked for the warmup's command, once both run."""
        assert runner.poll() is None, (tmp_path / "run.log").read_text()
        found = bench_processes(PORT_BASE)
        return found if len(found) >= 2 else []

    cleanup = [sys.executable, "-m", "afd_e2e", "cleanup", "--out", str(out), "--within", "8"]
    done = None
    try:
        benches = wait_for(bench_up, 240, "the bench client and its command")
        record = json.loads((out / "run-record.json").read_text())
        server = psutil.Process(record["processes"][0]["pid"])
        core = wait_for(lambda: engine_core_of(server.pid), 10, "the EngineCore")
        tree = [server, core, *benches]

        for proc in (server, *benches):  # what the processes that load model code (and the client) hold
            held = proc.environ()
            assert not set(CREDENTIALS) & set(held), proc
            if proc is not server:
                assert held[RUN_ID_ENV] == record["run_id"], proc  # found again by cleanup

        runner.send_signal(signal.SIGKILL)
        runner.wait(10)
        time.sleep(1.0)
        assert all(p.is_running() for p in tree)  # the runner is gone, its processes are not

        done = subprocess.run(cleanup, env=env, capture_output=True, text=True, timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(10)
        if done is None and (out / "run-record.json").exists():  # failed before its cleanup: leave nothing running
            subprocess.run(cleanup, env=env, capture_output=True, timeout=30, check=False)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "cleanup processes: passed" in done.stdout, done.stdout
    assert "cleanup leftovers: warned" in done.stdout, done.stdout
    assert all(f"pid {bench.pid}" in done.stdout for bench in benches), done.stdout
    assert bench_processes(PORT_BASE) == []
    for proc in tree:
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, proc
    servers = [(p["case"], p["name"], p["pid"]) for p in record["processes"]]
    assert find_run(record["run_id"], servers) == []
    assert json.loads((out / "results.json").read_text())["status"] == "interrupted"
