"""One build of a case across two agents on this machine, for the engine-tier (CPU) and GPU tests: each "agent" is a
separate ``afd-e2e`` process in its own working folder, with the buildkite-agent stub on PATH and one shared store
standing in for the build (meta-data and artifacts). The leader is ``afd-e2e run``, the follower ``afd-e2e join
--follow``, started by the test once the leader waits (as an uploaded step would be)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import psutil

from afd_e2e.runner.teardown import signal_tree
from afd_e2e.system.markers import MarkedProcess, find_marked
from repo_paths import REPO
from stall_support import engine_core_of

LEADER_JOB, LEADER_AGENT, FOLLOWER_AGENT = "leader-job", "leader-agent", "follower-agent"
STUB = REPO / "tests" / "stubs" / "record-call"


class Build:
    """The shared store of one build and the two agents' working folders; ``case``/``process`` is what the follower
    hosts; ``env`` adds to both agents' environment (gates, the model, the devices: ``follower_env`` to the
    follower's alone)."""

    def __init__(
        self,
        tmp_path: Path,
        profile: Path,
        *,
        case: str,
        process: str,
        port_base: int,
        env: Mapping[str, str],
        follower_env: Mapping[str, str] | None = None,
    ) -> None:
        self.root, self.profile = tmp_path, profile
        self.case, self.process, self.port_base = case, process, port_base
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "buildkite-agent").symlink_to(STUB)
        self.env = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": os.pathsep.join(sys.path),
            "STUB_BUILDKITE_STORE": str(tmp_path / "store"),
            "STUB_CALLS": str(tmp_path / "calls"),
            **env,
        }
        for name in ("BUILDKITE_JOB_ID", "BUILDKITE_AGENT_NAME", "BUILDKITE", "CI"):
            self.env.pop(name, None)
        self.follower_env = dict(follower_env or {})
        self.leader_dir, self.follower_dir = tmp_path / "leader", tmp_path / "follower"
        self.started: list[subprocess.Popen[str]] = []
        self.leader_dir.mkdir()
        self.follower_dir.mkdir()

    def _start(self, argv: list[str], cwd: Path, job: str, agent: str, extra: Mapping[str, str]) -> subprocess.Popen:
        env = {**self.env, **extra, "BUILDKITE_JOB_ID": job, "BUILDKITE_AGENT_NAME": agent}
        log = (cwd / "output.log").open("w")
        started = subprocess.Popen(
            [sys.executable, "-m", "afd_e2e", *argv], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True
        )
        self.started.append(started)
        return started

    def leader(self) -> subprocess.Popen[str]:
        argv = ["run", "--profile", str(self.profile), "--port-base", str(self.port_base), "--out", "out"]
        return self._start(argv, self.leader_dir, LEADER_JOB, LEADER_AGENT, {})

    def follower(self) -> subprocess.Popen[str]:
        argv = ["join", "--leader-job", LEADER_JOB, "--follow", f"{self.case}/{self.process}"]
        argv += ["--profile", str(self.profile), "--port-base", str(self.port_base)]
        return self._start(argv, self.follower_dir, "follower-job", FOLLOWER_AGENT, self.follower_env)

    def start(self, *, until_phase: str | None = None, waiting_s: float = 120.0) -> tuple[subprocess.Popen, ...]:
        """The leader, then the follower once the leader waits (as its uploaded step would start); with
        ``until_phase``, back once the leader's case runs that phase."""
        leader = self.leader()
        self.wait_meta_data("leader", "waiting", timeout_s=waiting_s)
        follower = self.follower()
        if until_phase is not None:
            self.wait_meta_data(f"{self.case}/phase", until_phase, timeout_s=240)
        return leader, follower

    def seconds_until_case_ends(self, since: float, limit_s: float) -> float:
        """Seconds from ``since`` (monotonic) until the leader's results.json no longer says the case runs."""
        while time.monotonic() - since < limit_s and self.case_results()["status"] == "running":
            time.sleep(0.1)
        return time.monotonic() - since

    def meta_data(self, key: str) -> str | None:
        done = subprocess.run(
            ["buildkite-agent", "meta-data", "get", f"afd-e2e/{LEADER_JOB}/{key}"],
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout if done.returncode == 0 else None

    def wait_meta_data(self, key: str, wanted: str | None = None, timeout_s: float = 120.0) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = self.meta_data(key)
            if value is not None and (wanted is None or value == wanted):
                return value
            time.sleep(0.2)
        raise AssertionError(f"meta-data {key} never {wanted or 'set'}: {self.outputs()}")

    @property
    def leader_results(self) -> Path:
        return self.leader_dir / "out" / "results.json"

    @property
    def follower_out(self) -> Path:
        return self.follower_dir / "afd-e2e-out" / f"follower-{LEADER_JOB}-{self.case}-{self.process}"

    def outputs(self) -> str:
        return "\n".join(
            f"--- {side}\n" + (folder / "output.log").read_text(encoding="utf-8")[-4000:]
            for side, folder in (("leader", self.leader_dir), ("follower", self.follower_dir))
            if (folder / "output.log").exists()
        )

    def follower_engine_core(self) -> psutil.Process:
        """The EngineCore of the follower's server (by the pid its readiness published)."""
        (api_pid,) = json.loads(self.meta_data(f"{self.case}/{self.process}/ready") or "{}")["pids"]
        core = engine_core_of(api_pid)
        assert core is not None, self.outputs()
        return core

    def case_results(self) -> dict:
        return json.loads(self.leader_results.read_text(encoding="utf-8"))["cases"][self.case]

    def _marked(self) -> dict[Path, list[MarkedProcess]]:
        """Each side's live processes (the run's markers), by its results folder."""
        found = {}
        for out in (self.leader_dir / "out", self.follower_out):
            record = out / "run-record.json"
            if record.exists():
                found[out] = find_marked(json.loads(record.read_text())["run_id"])
        return found

    def nothing_left(self) -> None:
        for out, marked in self._marked().items():
            assert marked == [], out

    def end(self) -> None:
        """After the test, whatever it asserted: both sides' afd-e2e and every process of their runs killed, so a
        failed test leaves no server holding the next test's ports."""
        for process in self.started:
            if process.poll() is None:
                process.kill()
                process.wait()
        for marked in self._marked().values():
            signal_tree(marked, signal.SIGKILL)


def finish(process: subprocess.Popen[str], timeout_s: float, build: Build) -> int:
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError(f"still running after {timeout_s:g} s: {build.outputs()}") from None
