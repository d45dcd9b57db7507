"""Lifecycle overheads of the runner on a real CPU vLLM, next to the upstream runner's approach, in one invocation.

Measured per approach, with observers that poll far faster than either runner:
- readiness lag: the server's first 200 on the readiness URL (observer, 5 ms polling) to the runner noticing;
- crash-detection lag: a server dying at start (an invalid flag) to the runner noticing (exit seen through a pidfd);
- teardown beyond exit: the whole process tree gone (observer, 2 ms polling) to the teardown returning;
- harness overhead: case wall time minus server start-up, the smoke request and the server's own shutdown;
- engine dead, API process alive: a ready server's ``VLLM::EngineCore`` killed while its API process is kept up
  (``VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1``, as vLLM 0.26's FFN role behaved) to the runner's watch naming the death,
  against the process-liveness check the harness had before (which waited out the start-up timeout).

The upstream approach (vllm-project/afd-plugin tests/e2e/runner.py): readiness polled every 2 s with the
process-exit check between polls; teardown SIGTERMs the group and polls the leader every 0.2 s.
Targets for afd-e2e: readiness lag <= 0.1 s, crash detection <= 0.5 s, teardown overhead <= 0.2 s,
overhead <= 2% of the case's wall time, engine-dead detection <= 1 s median.

    PYTHONPATH=python python benchmarks/lifecycle.py [--model DIR] [--port-base 19300]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import psutil

from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.results.status import Status
from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.child_env import child_environment
from afd_e2e.runner.markers import find_marked, is_alive, marker_env, new_run_id
from afd_e2e.runner.progress import Progress
from afd_e2e.runner.readiness import answers_ok
from afd_e2e.runner.run import execute_run
from afd_e2e.runner.server import CaseServers
from afd_e2e.runner.teardown import terminate
from afd_e2e.runner.watch import EngineDied
from afd_e2e.system.executables import resolve_executable
from afd_e2e.tiny_model import build_tiny_model

REPO = Path(__file__).resolve().parents[1]
PROFILE = load_profile("tiny-cpu")


# --------------------------------------------------------------------------- observers


class FirstOk:
    """Polls a URL every 5 ms and notes when it first answers 200."""

    def __init__(self, url: str) -> None:
        self.url, self.at, self._stop = url, None, threading.Event()
        threading.Thread(target=self._poll, daemon=True).start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            if answers_ok(self.url):
                self.at = time.monotonic()
                return
            time.sleep(0.005)

    def stop(self) -> None:
        self._stop.set()


class TreeGone:
    """Once the run's processes are up, polls them every 2 ms and notes when the last one is gone."""

    def __init__(self, find: Callable[[], list[psutil.Process]], ready: FirstOk) -> None:
        self.find, self.ready, self.at, self.size = find, ready, None, 0
        threading.Thread(target=self._poll, daemon=True).start()

    def _poll(self) -> None:
        while self.ready.at is None:
            time.sleep(0.01)
        tree = self.find()
        self.size = len(tree)
        while any(is_alive(p) for p in tree):
            time.sleep(0.002)
        self.at = time.monotonic()


def exit_time(pid: int) -> Callable[[], float]:
    """When ``pid`` exits (through a pidfd, which never reaps and so never races the runner's own wait)."""
    seen: dict[str, float] = {}
    pidfd = os.pidfd_open(pid)

    def watch() -> None:
        select.select([pidfd], [], [])
        seen["at"] = time.monotonic()
        os.close(pidfd)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()

    def result() -> float:
        thread.join()
        return seen["at"]

    return result


class PhaseClock(Progress):
    """The runner's own progress printer (quiet), noting when each phase began."""

    def __init__(self) -> None:
        super().__init__(stream=io.StringIO())
        self.began: dict[str, float] = {}

    def enter(self, case_id, phase, logs=()):
        self.began.setdefault(phase, time.monotonic())
        super().enter(case_id, phase, logs)


# --------------------------------------------------------------------------- the upstream runner's approach


def upstream_wait_for_openai_api(url: str, processes: list[subprocess.Popen], timeout: float) -> None:
    """tests/e2e/runner.py wait_for_openai_api: exit check, GET with a 5 s timeout, then sleep 2 s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in processes:
            returncode = process.poll()
            if returncode is not None:
                raise RuntimeError(f"vLLM process exited before the API was ready (returncode={returncode})")
        with contextlib.suppress(OSError, urllib.error.URLError), urllib.request.urlopen(url, timeout=5) as response:
            if response.status == 200:
                return
        time.sleep(2)
    raise TimeoutError(url)


def upstream_terminate_processes(processes: list[subprocess.Popen]) -> None:
    """tests/e2e/runner.py terminate_processes: SIGTERM each group, poll the leader every 0.2 s, SIGKILL at 20 s."""
    for process in reversed(processes):
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    for process in reversed(processes):
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


def upstream_completion(base_url: str, model: str) -> float:
    payload = {"model": model, "prompt": PROFILE.smoke.prompt, "max_tokens": PROFILE.smoke.max_tokens, "temperature": 0}
    request = urllib.request.Request(
        f"{base_url}/v1/completions", data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=120) as response:
        json.loads(response.read())
    return time.monotonic() - started


# --------------------------------------------------------------------------- one case per approach


def smoke_plan(model: Path, port_base: int, extra: tuple[str, ...] = ()):
    plan = build_plan(PROFILE, model_path=str(model), case_ids=["cpu-tp1"], port_base=port_base)
    case = plan.cases[0]
    process = dataclasses.replace(case.processes[0], argv=case.processes[0].argv + extra)
    return dataclasses.replace(plan, cases=(dataclasses.replace(case, phases=("smoke",), processes=(process,)),))


def figures(wall, launched, first_ok, noticed, workload, sigterm, gone, returned) -> dict[str, float]:
    shutdown_in_wall = min(gone, returned) - sigterm
    overhead = wall - (first_ok - launched) - workload - shutdown_in_wall
    return {
        "readiness lag (s)": noticed - first_ok,
        "teardown beyond exit (s)": returned - gone,
        "harness overhead (s)": overhead,
        "harness overhead (% of wall)": 100 * overhead / wall,
        "case wall (s)": wall,
        "server start-up (s)": first_ok - launched,
        "server shutdown (s)": gone - sigterm,
    }


def ours_case(model: Path, port_base: int, out: Path) -> dict[str, float]:
    plan = smoke_plan(model, port_base)
    case = plan.cases[0]
    clock = PhaseClock()
    first_ok = FirstOk(case.ready_url)
    record = out / "run-record.json"

    def tree() -> list[psutil.Process]:
        return [m.process for m in find_marked(json.loads(record.read_text())["run_id"])]

    gone = TreeGone(tree, first_ok)
    started = time.monotonic()
    data = execute_run(PROFILE, plan, out, progress=clock)
    wall = time.monotonic() - started
    first_ok.stop()
    result = data.cases[case.id]
    assert result.status is Status.PASSED and result.smoke is not None, result.failure
    b = clock.began
    return figures(
        wall, b["startup"], first_ok.at, b["smoke"], result.smoke.latency_s, b["teardown"], gone.at, b["hygiene"]
    )


def upstream_case(model: Path, port_base: int, out: Path) -> dict[str, float]:
    case = smoke_plan(model, port_base).cases[0]
    process = case.processes[0]
    run_id = new_run_id()
    scratch = out / "scratch"
    scratch.mkdir(parents=True)
    env = child_environment(
        os.environ, process, scratch=scratch, cache=out / "cache", markers=marker_env(run_id, case.id, process.name)
    )
    argv = (resolve_executable(process.argv[0]), *process.argv[1:])
    first_ok = FirstOk(case.ready_url)
    gone = TreeGone(lambda: [m.process for m in find_marked(run_id)], first_ok)
    started = time.monotonic()
    with (out / "server.log").open("wb") as log:
        popen = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    upstream_wait_for_openai_api(case.ready_url, [popen], case.startup_timeout_s)
    noticed = time.monotonic()
    latency = upstream_completion(case.base_url, case.served_model_name)
    sigterm = time.monotonic()
    upstream_terminate_processes([popen])
    returned = time.monotonic()
    wall = returned - started
    first_ok.stop()
    while gone.at is None:  # the upstream teardown may return before the tree is gone
        time.sleep(0.01)
    terminate(lambda: find_marked(run_id), 5.0)
    return figures(wall, started, first_ok.at, noticed, latency, sigterm, gone.at, returned)


def ours_crash(model: Path, port_base: int, out: Path) -> float:
    case = smoke_plan(model, port_base, ("--no-such-flag",)).cases[0]
    with CaseServers(case, out, scratch=out / "scratch", cache=out / "cache") as servers:
        servers.launch()
        exited = exit_time(servers.servers[0].pid)
        try:
            servers.wait_ready(CancelFlag())
        except EngineDied:
            noticed = time.monotonic()
        else:
            raise AssertionError("a server given an invalid flag became ready")
    return noticed - exited()


def engine_core_of(api_pid: int) -> psutil.Process:
    """The API server's ``VLLM::EngineCore`` child."""
    for child in psutil.Process(api_pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "EngineCore" in " ".join(child.cmdline()):
                return child
    raise AssertionError(f"no VLLM::EngineCore under pid {api_pid}")


def engine_dead_api_alive(model: Path, port_base: int, out: Path, watch_old_s: float) -> tuple[float, float | None]:
    """Kill a ready server's EngineCore while its API process stays up (``VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1``, as
    vLLM 0.26's FFN role did): seconds until the watch names the death, and until the pre-change check (process
    liveness, polled every 50 ms) noticed anything (None: not within ``watch_old_s``)."""
    case = smoke_plan(model, port_base).cases[0]
    env = {**os.environ, "VLLM_KEEP_ALIVE_ON_ENGINE_DEATH": "1"}
    with CaseServers(case, out, scratch=out / "scratch", cache=out / "cache", base_env=env) as servers:
        servers.launch()
        servers.wait_ready(CancelFlag())
        api = servers.servers[0]
        engine_core_of(api.pid).kill()
        killed = time.monotonic()
        assert servers.watch is not None and servers.watch.dead.wait(30), "the watch never saw the engine die"
        ours = servers.watch.death.seen_at - killed  # type: ignore[union-attr]
        old = None
        while time.monotonic() - killed < watch_old_s:
            if api.exit_code() is not None:
                old = time.monotonic() - killed
                break
            time.sleep(0.05)
    return ours, old


def upstream_crash(model: Path, port_base: int, out: Path) -> float:
    case = smoke_plan(model, port_base, ("--no-such-flag",)).cases[0]
    process = case.processes[0]
    env = child_environment(os.environ, process, scratch=out, cache=out / "cache", markers={})
    with (out / "crash-upstream.log").open("wb") as log:
        argv = (resolve_executable(process.argv[0]), *process.argv[1:])
        popen = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    exited = exit_time(popen.pid)
    try:
        upstream_wait_for_openai_api(case.ready_url, [popen], case.startup_timeout_s)
    except RuntimeError:
        noticed = time.monotonic()
    else:
        raise AssertionError("a server given an invalid flag became ready")
    upstream_terminate_processes([popen])
    return noticed - exited()


# --------------------------------------------------------------------------- report

TARGETS = {
    "readiness lag (s)": ("<=", 0.1),
    "crash detection lag (s)": ("<=", 0.5),
    "teardown beyond exit (s)": ("<=", 0.2),
    "harness overhead (% of wall)": ("<=", 2.0),
}
DEATH_TARGET_S = 1.0  # engine dead, API process alive: median detection


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="tiny model folder (default: build .tiny-model)")
    parser.add_argument("--port-base", type=int, default=19300)
    parser.add_argument("--out", type=Path, default=Path("/tmp/afd-e2e-lifecycle-bench"))
    parser.add_argument("--deaths", type=int, default=3, help="engine-dead repetitions (one server start each)")
    parser.add_argument("--watch-old-s", type=float, default=15.0, help="how long to watch the pre-change check")
    args = parser.parse_args()
    model = args.model or build_tiny_model(REPO / ".tiny-model")
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")

    def folder(name: str) -> Path:
        path = args.out / f"{stamp}-{name}"
        path.mkdir(parents=True)
        return path

    print("one real CPU vLLM start per measurement, one at a time; this takes ~4-5 minutes", flush=True)
    results = {"afd-e2e": {}, "upstream": {}}
    results["afd-e2e"]["crash detection lag (s)"] = ours_crash(model, args.port_base, folder("ours-crash"))
    results["upstream"]["crash detection lag (s)"] = upstream_crash(model, args.port_base, folder("upstream-crash"))
    results["afd-e2e"].update(ours_case(model, args.port_base, folder("ours-case")))
    results["upstream"].update(upstream_case(model, args.port_base + 20, folder("upstream-case")))

    print(f"\n{'':32}{'afd-e2e':>10}{'upstream':>10}{'upstream/ours':>15}   target (afd-e2e)")
    for key in results["afd-e2e"]:
        ours, theirs = results["afd-e2e"][key], results["upstream"][key]
        ratio = f"{theirs / ours:.1f}x" if key in TARGETS and ours > 0 else ""
        target = ""
        if key in TARGETS:
            op, bound = TARGETS[key]
            target = f"{op} {bound:g}  {'met' if ours <= bound else 'MISSED'}"
        print(f"{key:32}{ours:>10.3f}{theirs:>10.3f}{ratio:>15}   {target}")

    deaths = [
        engine_dead_api_alive(model, args.port_base, folder(f"engine-dead-{n}"), args.watch_old_s)
        for n in range(1, args.deaths + 1)
    ]
    ours_median = statistics.median(ours for ours, _old in deaths)
    startup_s = smoke_plan(model, args.port_base).cases[0].startup_timeout_s
    print(f"\nengine dead, API process alive (VLLM::EngineCore killed after ready, {args.deaths} times):")
    print(f"  afd-e2e (watch: /health, log markers, exit): {', '.join(f'{o:.3f}' for o, _ in deaths)} s")
    print(
        f"    median {ours_median:.3f} s   target <= {DEATH_TARGET_S:g} s  {'met' if ours_median <= DEATH_TARGET_S else 'MISSED'}"
    )
    for _ours, old in deaths:
        seen = f"exit after {old:.1f} s" if old is not None else f"nothing in {args.watch_old_s:g} s"
        print(f"  before this change (process liveness only): {seen}")
    print(
        f"  so before this change a dead engine during start-up was found only at the start-up timeout: "
        f"{startup_s:g} s here (tiny-cpu budgets.startup_s), {startup_s / ours_median:.0f}x the median above"
    )
    met = all(results["afd-e2e"][k] <= bound for k, (_op, bound) in TARGETS.items())
    return 0 if met and ours_median <= DEATH_TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
