"""A case across two agents against the same case on one agent, on the real CPU vLLM, in one invocation: the
wall time, and the ``buildkite-agent`` calls each agent makes (what a site's agent API sees).

    flock /tmp/afd-e2e-engine.lock env PYTHONPATH=python:tests python benchmarks/meta_data_calls.py [--questions 40]

- one agent: tiny-cpu-two-agents' case with its placement removed (``afd-e2e run`` launches the server itself);
- two agents: the profile as shipped, the leader (``afd-e2e run``) and the follower (``afd-e2e join --follow``),
  each a process in its own folder with ``buildkite-agent`` on PATH: the tests' stub (``tests/stubs/record-call``)
  with one shared store standing in for the build, wrapped to log each call's start, end and arguments per agent.

Both sides ask the same GSM8K questions one at a time (``--questions``), so the follow stretch lasts tens of
seconds. Printed: each side's wall time and the ratio; per agent, its calls by command, its calls per second over
its whole run and over the steady stretch (from the leader's ``running`` to its case's end: heartbeats, phase and
state reads), and the stub's latency per call (median, p95). The stub answers from local files, so the counts and
rates transfer to real Buildkite; the latency does not (a real call crosses the network).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from afd_e2e.results import load_results
from afd_e2e.tiny_model import build_tiny_model
from repo_paths import GSM8K_DIR, REPO

PROFILE = REPO / "python" / "afd_e2e" / "profiles" / "tiny-cpu-two-agents.yaml"
CASE, PROCESS, LEADER_JOB = "cpu-tp1-remote", "server", "bench-leader-job"
TIMED_STUB = """#!/bin/bash
# buildkite-agent for one agent of the benchmark: the tests' stub, each call's start, end and arguments logged
start=$(date +%s.%N)
rc=0
"$STUB" "$@" || rc=$?
printf '%s %s %s\\n' "$start" "$(date +%s.%N)" "$*" >>"$TIMED_CALLS"
exit "$rc"
"""


@dataclass(frozen=True)
class Call:
    start: float
    end: float
    args: tuple[str, ...]

    @property
    def command(self) -> str:
        return " ".join(self.args[:2])


def read_calls(path: Path) -> list[Call]:
    calls = []
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else ():
        start, end, *args = line.split(" ")
        calls.append(Call(float(start), float(end), tuple(args)))
    return sorted(calls, key=lambda c: c.start)


def profile_document(questions: int, placed: bool) -> dict:
    document = yaml.safe_load(PROFILE.read_text(encoding="utf-8"))
    document["workloads"]["gsm8k"].update(questions=questions, concurrency=1)
    # the default heartbeat cadence, not the tests' shorter one: the rates a real agent API sees
    document["budgets"].pop("heartbeat_lost_s")
    if not placed:
        document["cases"][CASE].pop("placement")
    return document


def agent_env(work: Path, agent: str, job: str | None, model: Path) -> dict[str, str]:
    bin_dir, stub_dir = work / f"bin-{agent}", work / f"stub-{agent}"
    bin_dir.mkdir()
    stub_dir.mkdir()
    wrapper = bin_dir / "buildkite-agent"
    wrapper.write_text(TIMED_STUB, encoding="utf-8")
    wrapper.chmod(0o755)
    (stub_dir / "buildkite-agent").symlink_to(REPO / "tests" / "stubs" / "record-call")  # it answers by its name
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join(sys.path),
        "STUB": str(stub_dir / "buildkite-agent"),
        "STUB_CALLS": str(work / f"calls-{agent}.log"),
        "STUB_BUILDKITE_STORE": str(work / "store"),
        "TIMED_CALLS": str(work / f"timed-{agent}.log"),
        "AFD_E2E_TINY_MODEL": str(model),
        "AFD_E2E_GSM8K_DIR": str(GSM8K_DIR),
        "BUILDKITE_AGENT_NAME": agent,
    }
    for name in ("BUILDKITE_JOB_ID", "BUILDKITE", "CI"):
        env.pop(name, None)
    if job is not None:
        env["BUILDKITE_JOB_ID"] = job
    return env


def afd_e2e(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    cwd.mkdir(exist_ok=True)
    log = (cwd / "output.log").open("w")
    return subprocess.Popen(
        [sys.executable, "-m", "afd_e2e", *argv], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True
    )


def wait_for_key(store: Path, key: str, timeout_s: float = 120.0) -> None:
    """The leader's ``waiting``: the follower starts after it, as an uploaded step would."""
    path = store / "meta-data" / key.encode().hex()
    deadline = time.monotonic() + timeout_s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def finished(process: subprocess.Popen[str], cwd: Path, what: str) -> None:
    if process.wait(timeout=900) != 0:
        sys.exit(f"{what} exited {process.returncode}: {(cwd / 'output.log').read_text(encoding='utf-8')[-3000:]}")


def one_agent(work: Path, model: Path, questions: int, port_base: int) -> float:
    profile = work / "one-agent.yaml"
    profile.write_text(yaml.safe_dump(profile_document(questions, placed=False)), encoding="utf-8")
    cwd = work / "one"
    started = time.monotonic()
    run = afd_e2e(
        ["run", "--profile", str(profile), "--port-base", str(port_base), "--out", "out"],
        cwd,
        agent_env(work, "single", None, model),
    )
    finished(run, cwd, "one agent: afd-e2e run")
    return time.monotonic() - started


def two_agents(work: Path, model: Path, questions: int, port_base: int) -> tuple[float, dict[str, float]]:
    """(the leader's wall time, each agent's run span), the calls logged per agent."""
    profile = work / "two-agents.yaml"
    profile.write_text(yaml.safe_dump(profile_document(questions, placed=True)), encoding="utf-8")
    leader_dir, follower_dir = work / "leader", work / "follower"
    started = time.monotonic()
    leader = afd_e2e(
        ["run", "--profile", str(profile), "--port-base", str(port_base), "--out", "out"],
        leader_dir,
        agent_env(work, "leader", LEADER_JOB, model),
    )
    wait_for_key(work / "store", f"afd-e2e/{LEADER_JOB}/leader")
    follower_started = time.monotonic()
    follower = afd_e2e(
        [
            "join",
            "--leader-job",
            LEADER_JOB,
            "--follow",
            f"{CASE}/{PROCESS}",
            "--profile",
            str(profile),
            "--port-base",
            str(port_base),
        ],
        follower_dir,
        agent_env(work, "follower", "bench-follower-job", model),
    )
    finished(leader, leader_dir, "leader: afd-e2e run")
    leader_wall = time.monotonic() - started
    finished(follower, follower_dir, "follower: afd-e2e join")
    case = load_results(leader_dir / "out").case(CASE)
    if case is None or case.status.value != "passed":
        sys.exit(f"two agents: the case did not pass: {case and case.failure}")
    return leader_wall, {"leader": leader_wall, "follower": time.monotonic() - follower_started}


def steady_window(leader_calls: list[Call]) -> tuple[float, float] | None:
    """From the leader's ``running`` (its second write of its state key) to its case's end (the last write of its
    ``<case>/phase`` key)."""
    state_key, phase_key = f"afd-e2e/{LEADER_JOB}/leader", f"afd-e2e/{LEADER_JOB}/{CASE}/phase"
    state_sets = [c for c in leader_calls if c.args[:3] == ("meta-data", "set", state_key)]
    phase_sets = [c for c in leader_calls if c.args[:3] == ("meta-data", "set", phase_key)]
    if len(state_sets) < 2 or not phase_sets:
        return None
    return state_sets[1].start, phase_sets[-1].start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=40, help="GSM8K questions, asked one at a time")
    parser.add_argument("--port-base", type=int, default=24300)
    args = parser.parse_args()
    model = build_tiny_model(REPO / ".tiny-model")
    print(f"tiny-cpu-two-agents' case, smoke and {args.questions} GSM8K questions one at a time; real CPU vLLM")
    with tempfile.TemporaryDirectory(prefix="afd-e2e-meta-data-bench-") as tmp:
        work = Path(tmp)
        one_wall = one_agent(work, model, args.questions, args.port_base)
        print(f"  one agent:  {one_wall:.1f} s", flush=True)
        two_wall, spans = two_agents(work, model, args.questions, args.port_base + 20)
        print(f"  two agents: {two_wall:.1f} s (the leader's run)", flush=True)
        calls = {agent: read_calls(work / f"timed-{agent}.log") for agent in ("leader", "follower")}
        single_calls = read_calls(work / "timed-single.log")
    window = steady_window(calls["leader"])
    print()
    print(f"two agents / one agent: {two_wall / one_wall:.2f}x wall time ({two_wall - one_wall:+.1f} s)")
    print(f"one agent: {len(single_calls)} buildkite-agent calls")
    for agent, agent_calls in calls.items():
        latencies = sorted(c.end - c.start for c in agent_calls)
        by_command = ", ".join(f"{cmd} {n}" for cmd, n in Counter(c.command for c in agent_calls).most_common())
        print(f"{agent}: {len(agent_calls)} calls in {spans[agent]:.1f} s = {len(agent_calls) / spans[agent]:.2f}/s")
        print(f"  by command: {by_command}")
        if window is not None:
            steady = [c for c in agent_calls if window[0] <= c.start < window[1]]
            span = window[1] - window[0]
            print(f"  steady stretch ({span:.1f} s, the leader running): {len(steady) / span:.2f} calls/s")
        if latencies:
            p95 = latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))]
            print(
                f"  stub latency per call: median {statistics.median(latencies) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
