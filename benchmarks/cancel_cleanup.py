"""A cancelled job's cleanup inside the agent's 10 s grace, on the real clock, without and beside CPU hogs, in one
invocation: the figure tests/cancel.bats does not assert (it reads the hooks' arithmetic on its own clock, and runs
the real cleanup with a grace no load can run out).

    PYTHONPATH=python python benchmarks/cancel_cleanup.py [--runs 5] [--hogs 2]

Each run is the cancel test's job: the command hook (in a process group of its own, as the agent runs it) with the
stand-in runner that leaves a real server holding a real port, ignoring SIGTERM, in a session of its own
(tests/bats/cancel/run-leaving-servers.py); the agent's SIGTERM to the group; then pre-exit, as the agent runs it
after a cancel, with the real ``afd-e2e cleanup`` and buildkite-agent stubbed (tests/stubs/record-call). Printed per
load: the cancel to pre-exit's end (median, max) and what that leaves of the grace, whether the port was free and
the server gone each time, and, as the baseline, ``afd-e2e cleanup`` with nothing to clean (the Python start and
imports that every cleanup pays first); then the loaded / idle ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
GRACE_S = 10  # the agent's cancel-grace-period, Buildkite's default
PORT_BASE = 24500  # the plan's ports for this benchmark (tiny-cpu's first case holds one)
WRAPPER = """#!/bin/bash
export PYTHONPATH={python_path}
case "$1" in
  run) exec {python} {repo}/tests/bats/cancel/run-leaving-servers.py "$@" ;;
  cleanup) exec {python} -m afd_e2e "$@" ;;
esac
exec {repo}/tests/stubs/record-call "$@"
"""


def listening(port: int) -> bool:
    with contextlib.closing(socket.socket()) as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def job_env(work: Path) -> dict[str, str]:
    """The environment the agent gives a job's hooks: stubs first on PATH, the plugin's options, the grace."""
    stubs = work / "bin"
    stubs.mkdir()
    for name in ("buildkite-agent", "nvidia-smi"):
        (stubs / name).symlink_to(REPO / "tests" / "stubs" / "record-call")
    wrapper = stubs / "afd-e2e"
    wrapper.write_text(WRAPPER.format(python_path=REPO / "python", python=sys.executable, repo=REPO))
    wrapper.chmod(0o755)
    return {
        "PATH": f"{stubs}:/usr/bin:/bin",
        "TMPDIR": str(work),
        "STUB_CALLS": str(work / "calls.log"),
        "BUILDKITE_JOB_ID": "bench-job",
        "BUILDKITE_AGENT_NAME": "bench-agent",
        "BUILDKITE_PLUGIN_AFD_E2E_PROFILE": "qwen3.5-122b-a10b",
        "BUILDKITE_CANCEL_GRACE_PERIOD": str(GRACE_S),
        "PORT_BASE": str(PORT_BASE),
        "SERVERS_FILE": str(work / "servers"),
    }


def one_cancel(work: Path) -> tuple[float, bool]:
    """One job cancelled once its server listens: (cancel to pre-exit's end in s, whether all was clean after)."""
    env = job_env(work)
    servers_file = work / "servers"
    job = subprocess.Popen(
        [REPO / "hooks" / "command"], cwd=work, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    while not (servers_file.exists() and servers_file.read_text().strip()):
        time.sleep(0.02)
    servers = [tuple(int(v) for v in line.split()) for line in servers_file.read_text().splitlines()]
    while not all(listening(port) for _, port in servers):
        time.sleep(0.02)
    cancelled = time.monotonic()
    os.killpg(job.pid, signal.SIGTERM)
    job.wait()
    subprocess.run(
        [REPO / "hooks" / "pre-exit"], cwd=work, env={**env, "BUILDKITE_JOB_CANCELLED": "true"},
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, check=True,
    )  # fmt: skip
    took = time.monotonic() - cancelled
    clean = all(not listening(port) for _, port in servers)
    for pid, _ in servers:
        with contextlib.suppress(psutil.NoSuchProcess):
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                clean = False  # the cleanup missed it: counted, then ended here, never left behind
                os.kill(pid, signal.SIGKILL)
    return took, clean


def bare_cleanup(work: Path) -> float:
    """``afd-e2e cleanup`` with no run to clean: the start-up and imports every cleanup pays."""
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "afd_e2e", "cleanup", "--out", str(work)], env={**os.environ, "PYTHONPATH": str(REPO / "python")},
        stdout=subprocess.DEVNULL, check=True,
    )  # fmt: skip
    return time.monotonic() - started


@contextlib.contextmanager
def hogs(count: int) -> Iterator[None]:
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for hog in spinning:
            hog.kill()
            hog.wait()


def measure(runs: int, hog_count: int) -> tuple[list[float], list[float], int]:
    cancels, bare, clean = [], [], 0
    with hogs(hog_count):
        for _ in range(runs):
            with tempfile.TemporaryDirectory(prefix="afd-e2e-cancel-bench-") as tmp:
                took, was_clean = one_cancel(Path(tmp))
                cancels.append(took)
                clean += was_clean
                bare.append(bare_cleanup(Path(tmp)))
    label = f"{hog_count} CPU hogs" if hog_count else "no hogs"
    print(
        f"{label:>11}: cancel to clean {statistics.median(cancels):.2f} s median, {max(cancels):.2f} s max "
        f"({GRACE_S - max(cancels):.2f} s of the {GRACE_S} s grace left at worst); clean {clean}/{runs}; "
        f"bare cleanup {statistics.median(bare):.2f} s median",
        flush=True,
    )
    return cancels, bare, clean


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="cancelled jobs per load")
    parser.add_argument("--hogs", type=int, default=2, help="CPU hogs beside the loaded runs")
    args = parser.parse_args()
    print(f"a cancelled job, the agent's {GRACE_S} s grace, one server ignoring SIGTERM; {args.runs} runs per load")
    idle, idle_bare, idle_clean = measure(args.runs, 0)
    loaded, loaded_bare, loaded_clean = measure(args.runs, args.hogs)
    print(
        f"with hogs / without: cancel to clean {statistics.median(loaded) / statistics.median(idle):.2f}x, "
        f"bare cleanup {statistics.median(loaded_bare) / statistics.median(idle_bare):.2f}x"
    )
    return 0 if idle_clean == loaded_clean == args.runs and max(idle + loaded) < GRACE_S else 1


if __name__ == "__main__":
    sys.exit(main())
