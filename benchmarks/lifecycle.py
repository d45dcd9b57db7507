"""Lifecycle overheads of the runner on a real CPU vLLM, next to the upstream runner's approach, in one invocation.

Measured per approach, with observers that poll far faster than either runner:
- readiness lag: the server's first 200 on the readiness URL (observer, 5 ms polling) to the runner noticing;
- crash-detection lag: a server dying at start (an invalid flag) to the runner noticing (exit seen through a pidfd);
- teardown beyond exit: the whole process tree gone (observer, 2 ms polling) to the teardown returning;
- harness overhead: case wall time minus server start-up, the smoke request and the server's own shutdown;
- engine dead, API process alive: a ready server's ``VLLM::EngineCore`` killed while its API process is kept up
  (``VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1``, as vLLM 0.26's FFN role behaved) to the runner's watch naming the death,
  against the process-liveness check the harness had before (which waited out the start-up timeout);
- hang to verdict: the engine hung inside its step by the fault plugin (``tests/fault_plugin``), mid-bench, to the
  case's verdict: the progress watchdog (``budgets.stall_s``) against the repetition budget alone (the watchdog
  off: today's behaviour before it), both in this invocation with the same budgets;
- a cancel mid-start-up: ``afd-e2e run`` SIGTERMed once vLLM logs its first line, to the run's exit (its servers
  torn down, its records written), against the same server launched bare and SIGTERMed at the same moment (its
  process group gone). Target: the run's exit within ``CANCEL_GRACE_S`` (5 s), so that Buildkite's default 10 s
  grace leaves pre-exit's cleanup its share (the engine test allows the run's whole share, ``RUNNER_GRACE_S``);
- the samplers' cost: one server, ``--sampler-runs`` pairs of bench repetitions alternating telemetry on and off:
  the sampler thread's CPU-seconds over the repetition's wall time, and the output-throughput delta (on vs off)
  with its 95% Welch interval. Target: under 0.5% of the case's wall time.

The upstream approach (vllm-project/afd-plugin tests/e2e/runner.py): readiness polled every 2 s with the
process-exit check between polls; teardown SIGTERMs the group and polls the leader every 0.2 s.
Targets for afd-e2e: readiness lag <= 0.1 s, crash detection <= 0.5 s, teardown overhead <= 0.2 s,
overhead <= 2% of the case's wall time, engine-dead detection <= 1 s median, hang to verdict <= stall_s + 2 s,
a cancel mid-start-up ended <= 5 s.

    PYTHONPATH=python python benchmarks/lifecycle.py [--model DIR] [--port-base 19300] [--parts stall cancel]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
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

from afd_e2e.phases import rendering
from afd_e2e.phases.smoke import smoke_spec
from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.profile.bench_spec import bench_spec
from afd_e2e.results.status import Status
from afd_e2e.runner import dispatch
from afd_e2e.runner.cancellation import CANCEL_GRACE_S, CancelFlag
from afd_e2e.runner.readiness import answers_ok
from afd_e2e.runner.run import execute_run
from afd_e2e.runner.server import CaseServers
from afd_e2e.runner.teardown import terminate
from afd_e2e.runner.watch import EngineDied
from afd_e2e.system.child_env import child_environment
from afd_e2e.system.executables import resolve_executable
from afd_e2e.system.markers import find_marked, is_alive, marker_env, new_run_id
from afd_e2e.system.progress import Progress, meaningful
from afd_e2e.telemetry.sampler import Sampler, TelemetrySettings
from afd_e2e.tiny_model import build_tiny_model
from afd_e2e.workloads import stats
from afd_e2e.workloads.bench import bench_argv, client_env, run_repetition

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from repo_paths import GSM8K_DIR  # noqa: E402
from stall_support import LastToken  # noqa: E402  (the stall tests' observer of the API's token counters)

rendering.install_renderers()  # this benchmark runs and renders cases, as `afd-e2e run` does
PROFILE = load_profile("tiny-cpu")
PARTS = ("overheads", "deaths", "stall", "cancel", "sampler")


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
    """The runner's own progress printer (quiet), noting when each phase began and when a stall was reported."""

    def __init__(self) -> None:
        super().__init__(stream=io.StringIO())
        self.began: dict[str, float] = {}
        self.stalled_at: float | None = None

    def enter(self, case_id, phase, logs=()):
        self.began.setdefault(phase, time.monotonic())
        super().enter(case_id, phase, logs)

    def __call__(self, message: str) -> None:
        if self.stalled_at is None and "engine stalled" in message:
            self.stalled_at = time.monotonic()
        super().__call__(message)


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
    smoke = smoke_spec(PROFILE)
    payload = {"model": model, "prompt": smoke.prompt, "max_tokens": smoke.max_tokens, "temperature": 0}
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
    smoke = result.section("smoke")
    assert result.status is Status.PASSED and smoke is not None, result.failure
    b = clock.began
    return figures(wall, b["startup"], first_ok.at, b["smoke"], smoke.latency_s, b["teardown"], gone.at, b["hygiene"])


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


# --------------------------------------------------------------------------- hang to verdict, the samplers' cost

HANG_AFTER_STEPS = "AFD_E2E_FAULT_HANG_AFTER_STEPS"
REPETITION_BUDGET_S = 60.0  # both hang runs: one bench repetition's budget (tiny-cpu ships 300 s)


def hang_profile(watchdog: bool):
    """tiny-cpu with a short bench (one repetition, no warmup) and a 60 s repetition budget; without the watchdog
    its stall_s is out of reach, which is how the harness behaved before it."""
    budgets = PROFILE.budgets.replaced(
        bench_repetition_s=REPETITION_BUDGET_S,
        request_s=30.0,
        stall_s=PROFILE.budgets.stall_s if watchdog else 1e9,
    )
    bench = dataclasses.replace(
        bench_spec(PROFILE),
        input_len=16,
        output_len=16,
        num_prompts=16,
        max_concurrency=4,
        warmups=0,
        repetitions=1,
        timeout_s=REPETITION_BUDGET_S,
    )
    return dataclasses.replace(PROFILE, budgets=budgets, workloads={**PROFILE.workloads, "bench": bench})


def hang_to_verdict(model: Path, port_base: int, out: Path, *, watchdog: bool) -> dict[str, float]:
    """The engine hangs in its 4th step (the bench's first request); seconds from its last token to the verdict."""
    profile = hang_profile(watchdog)
    plan = build_plan(profile, model_path=str(model), case_ids=["cpu-tp1"], port_base=port_base)
    plan = dataclasses.replace(plan, cases=(dataclasses.replace(plan.cases[0], phases=("performance",)),))
    clock, last = PhaseClock(), LastToken(port_base, every_s=0.1)
    os.environ[HANG_AFTER_STEPS] = "3"
    try:
        data = execute_run(profile, plan, out, progress=clock)
    finally:
        os.environ.pop(HANG_AFTER_STEPS, None)
        last.stop()
    case = data.cases["cpu-tp1"]
    assert case.status is Status.FAILED and last.at is not None, case.failure
    verdict = clock.stalled_at if watchdog else clock.began["teardown"]
    assert verdict is not None, case.failure
    return {
        "hang to verdict (s)": verdict - last.at,
        "hang to teardown (s)": clock.began["teardown"] - last.at,
        "failure": case.failure,  # type: ignore[dict-item]
    }


def sampler_cost(model: Path, port_base: int, out: Path, pairs: int, prompts: int) -> dict[str, object]:
    """One server; ``pairs`` x (telemetry on, telemetry off) bench repetitions of ``prompts`` prompts, alternating."""
    spec = dataclasses.replace(
        bench_spec(PROFILE), num_prompts=prompts, output_len=64, max_concurrency=8, request_rate=64
    )
    case = smoke_plan(model, port_base).cases[0]
    settings = TelemetrySettings(stall_s=PROFILE.budgets.stall_s, workload_phases=dispatch.stall_watched_phases())
    runs: list[dict[str, float]] = []
    with CaseServers(case, out / "logs", scratch=out / "scratch", cache=out / "cache") as servers:
        servers.launch()
        servers.wait_ready(CancelFlag())
        executable = resolve_executable(case.processes[0].argv[0])
        for index in range(2 * pairs):
            on = index % 2 == 0
            argv = bench_argv(
                executable,
                spec,
                base_url=case.base_url,
                model=case.served_model_name,
                tokenizer=str(model),
                result_dir=out,
                result_file=f"bench-{index}.json",
            )
            sampler = Sampler(case, servers.servers, settings).start() if on else None
            if sampler is not None:
                sampler.mark("performance")
            started = time.monotonic()
            rep, _ended = run_repetition(
                argv,
                result_path=out / f"bench-{index}.json",
                log_path=out / f"bench-{index}.log",
                num_prompts=spec.num_prompts,
                required=("output_throughput",),
                timeout_s=600,
                label=f"bench {index}",
                progress=lambda _line: None,
                cancelled=threading.Event(),
                heartbeat_s=60,
                env=client_env(dict(os.environ)),
            )
            wall = time.monotonic() - started
            if sampler is not None:
                sampler.stop()
            assert rep.status is Status.PASSED, rep.failure
            runs.append(
                {
                    "on": on,
                    "wall_s": wall,
                    "cpu_s": sampler.cpu_s if sampler else 0.0,
                    "samples": len(sampler.samples) if sampler else 0,
                    "throughput": float(rep.metrics["output_throughput"]),
                }
            )
            print(
                f"  run {index + 1}: telemetry {'on ' if on else 'off'} {runs[-1]['throughput']:.1f} tok/s", flush=True
            )
    on_runs, off_runs = [r for r in runs if r["on"]], [r for r in runs if not r["on"]]
    on_tp, off_tp = [r["throughput"] for r in on_runs], [r["throughput"] for r in off_runs]
    interval = stats.welch_interval(off_tp, on_tp)
    base = stats.mean(off_tp)
    return {
        "cpu_pct": 100 * sum(r["cpu_s"] for r in on_runs) / sum(r["wall_s"] for r in on_runs),
        "cpu_s": sum(r["cpu_s"] for r in on_runs),
        "wall_s": sum(r["wall_s"] for r in on_runs),
        "samples": sum(r["samples"] for r in on_runs),
        "on": on_tp,
        "off": off_tp,
        "delta_pct": 100 * (stats.mean(on_tp) - base) / base,
        "ci_pct": None if interval is None else [100 * bound / base for bound in interval],
    }


def report_stall(model: Path, port_base: int, folder: Callable[[str], Path]) -> bool:
    if importlib.util.find_spec("afd_e2e_fault_plugin") is None:
        print("\nhang to verdict: skipped: the fault plugin is not installed (pip install -e tests/fault_plugin)")
        return True
    print("\nhang to verdict (the engine hung in its step by the fault plugin, mid-bench; same budgets):", flush=True)
    ours = hang_to_verdict(model, port_base, folder("hang-watchdog"), watchdog=True)
    before = hang_to_verdict(model, port_base, folder("hang-budget"), watchdog=False)
    stall_s = PROFILE.budgets.stall_s
    print(
        f"  watchdog (budgets.stall_s = {stall_s:g} s): {ours['hang to verdict (s)']:.1f} s to the verdict "
        f"({ours['hang to teardown (s)']:.1f} s to the teardown, forensics taken between)"
    )
    print(f"    {ours['failure']}")
    print(
        f"  repetition budget alone (budgets.bench_repetition_s = {REPETITION_BUDGET_S:g} s): "
        f"{before['hang to verdict (s)']:.1f} s to the verdict"
    )
    print(f"    {before['failure']}")
    ratio = before["hang to verdict (s)"] / ours["hang to verdict (s)"]
    limit = stall_s + 2.0
    met = ours["hang to verdict (s)"] <= limit
    print(f"  {ratio:.1f}x sooner; target <= stall_s + 2 s = {limit:g} s  {'met' if met else 'MISSED'}")
    seed = load_profile("qwen3.5-122b-a10b").budgets
    print(
        f"  with the seed's budgets: stall_s {seed.stall_s:g} s against bench_repetition_s {seed.bench_repetition_s:g} s"
    )
    return met


# --------------------------------------------------------------------------- a cancel mid-start-up


def vllm_logging(log: Path) -> bool:
    """Whether vLLM runs its own start-up: its log has a line (the moment both cancels below are sent)."""
    return log.exists() and any(meaningful(line) for line in log.read_text(errors="replace").splitlines())


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout_s:g} s")
        time.sleep(0.02)


def cancel_ours(model: Path, port_base: int, out: Path) -> tuple[float, str]:
    """``afd-e2e run`` of cpu-tp1, SIGTERMed once vLLM logs: seconds to the run's exit, and its forced_kill check."""
    argv = [sys.executable, "-m", "afd_e2e", "run", "--profile", "tiny-cpu", "--model", str(model), "--case", "cpu-tp1"]
    argv += ["--port-base", str(port_base), "--out", str(out), "--gsm8k-dir", str(GSM8K_DIR)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with (out.parent / f"{out.name}-run.log").open("wb") as output:
        runner = subprocess.Popen(argv, env=env, stdout=output, stderr=subprocess.STDOUT)
    wait_until(lambda: vllm_logging(out / "logs" / "cpu-tp1" / "server.log"), 300, "line from vLLM")
    runner.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    runner.wait(60)
    took = time.monotonic() - sent
    case = json.loads((out / "results.json").read_text())["cases"]["cpu-tp1"]
    assert case["status"] == "cancelled", case["failure"]
    forced = next(c for c in case["hygiene"] if c["check"] == "forced_kill")
    return took, f"{forced['status']}: {forced['detail']}"


def cancel_bare(model: Path, port_base: int, out: Path) -> float:
    """The same server launched bare, its process group SIGTERMed once it logs: seconds until its tree is gone."""
    process = smoke_plan(model, port_base).cases[0].processes[0]
    run_id = new_run_id()
    env = child_environment(
        os.environ, process, scratch=out, cache=out / "cache", markers=marker_env(run_id, "cpu-tp1", process.name)
    )
    log = out / "server.log"
    with log.open("wb") as output:
        argv = (resolve_executable(process.argv[0]), *process.argv[1:])
        popen = subprocess.Popen(argv, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    wait_until(lambda: vllm_logging(log), 300, "line from vLLM")
    os.killpg(popen.pid, signal.SIGTERM)
    sent = time.monotonic()
    while popen.poll() is None or find_marked(run_id):
        time.sleep(0.02)
    return time.monotonic() - sent


def report_cancel(model: Path, port_base: int, folder: Callable[[str], Path]) -> bool:
    print("\na cancel mid-start-up (SIGTERM once vLLM logs its first line):", flush=True)
    bare = cancel_bare(model, port_base, folder("cancel-bare"))
    ours, forced = cancel_ours(model, port_base, folder("cancel-run"))
    print(f"  vLLM alone (its process group SIGTERMed): {bare:.2f} s until every process is gone")
    print(f"  afd-e2e run (SIGTERM to the runner): {ours:.2f} s to its exit, records written ({ours / bare:.1f}x)")
    print(f"    forced_kill {forced}")
    met = ours <= CANCEL_GRACE_S
    print(
        f"  target <= CANCEL_GRACE_S = {CANCEL_GRACE_S:g} s (of Buildkite's 10 s grace)  {'met' if met else 'MISSED'}"
    )
    return met


SAMPLER_TARGET_PCT = 0.5


def report_sampler(model: Path, port_base: int, folder: Callable[[str], Path], pairs: int, prompts: int) -> bool:
    print(
        f"\nthe samplers' cost ({pairs} x telemetry on/off, alternating bench repetitions on one server):", flush=True
    )
    cost = sampler_cost(model, port_base, folder("sampler"), pairs, prompts)
    met = cost["cpu_pct"] < SAMPLER_TARGET_PCT
    print(
        f"  sampler CPU: {cost['cpu_s']:.3f} CPU-s over {cost['wall_s']:.1f} s of telemetry-on wall time "
        f"({cost['samples']} samples) = {cost['cpu_pct']:.3f}%   target < {SAMPLER_TARGET_PCT:g}%  "
        f"{'met' if met else 'MISSED'}"
    )
    ci = cost["ci_pct"]
    interval = f"95% CI [{ci[0]:+.2f}%, {ci[1]:+.2f}%]" if ci else "no interval"
    print(
        f"  output throughput on {stats.mean(cost['on']):.1f} vs off {stats.mean(cost['off']):.1f} tok/s: "
        f"{cost['delta_pct']:+.2f}% ({interval})"
    )
    return met


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
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="run only these parts")
    parser.add_argument("--sampler-runs", type=int, default=5, help="telemetry on/off pairs (at least 5)")
    parser.add_argument("--sampler-prompts", type=int, default=256, help="prompts (64 tokens out) per sampler run")
    args = parser.parse_args()
    model = args.model or build_tiny_model(REPO / ".tiny-model")
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")

    def folder(name: str) -> Path:
        path = args.out / f"{stamp}-{name}"
        path.mkdir(parents=True)
        return path

    print(f"one real CPU vLLM start per measurement, one at a time; parts: {', '.join(args.parts)}", flush=True)
    met = True
    if "overheads" in args.parts:
        met &= report_overheads(model, args.port_base, folder)
    if "deaths" in args.parts:
        met &= report_deaths(model, args.port_base, folder, args.deaths, args.watch_old_s)
    if "stall" in args.parts:
        met &= report_stall(model, args.port_base, folder)
    if "cancel" in args.parts:
        met &= report_cancel(model, args.port_base, folder)
    if "sampler" in args.parts:
        met &= report_sampler(model, args.port_base, folder, max(args.sampler_runs, 5), args.sampler_prompts)
    return 0 if met else 1


def report_overheads(model: Path, port_base: int, folder: Callable[[str], Path]) -> bool:
    results: dict[str, dict[str, float]] = {"afd-e2e": {}, "upstream": {}}
    results["afd-e2e"]["crash detection lag (s)"] = ours_crash(model, port_base, folder("ours-crash"))
    results["upstream"]["crash detection lag (s)"] = upstream_crash(model, port_base, folder("upstream-crash"))
    results["afd-e2e"].update(ours_case(model, port_base, folder("ours-case")))
    results["upstream"].update(upstream_case(model, port_base + 20, folder("upstream-case")))

    print(f"\n{'':32}{'afd-e2e':>10}{'upstream':>10}{'upstream/ours':>15}   target (afd-e2e)")
    for key in results["afd-e2e"]:
        ours, theirs = results["afd-e2e"][key], results["upstream"][key]
        ratio = f"{theirs / ours:.1f}x" if key in TARGETS and ours > 0 else ""
        target = ""
        if key in TARGETS:
            op, bound = TARGETS[key]
            target = f"{op} {bound:g}  {'met' if ours <= bound else 'MISSED'}"
        print(f"{key:32}{ours:>10.3f}{theirs:>10.3f}{ratio:>15}   {target}")
    return all(results["afd-e2e"][k] <= bound for k, (_op, bound) in TARGETS.items())


def report_deaths(model: Path, port_base: int, folder: Callable[[str], Path], repeats: int, watch_old_s: float) -> bool:
    deaths = [
        engine_dead_api_alive(model, port_base, folder(f"engine-dead-{n}"), watch_old_s) for n in range(1, repeats + 1)
    ]
    ours_median = statistics.median(ours for ours, _old in deaths)
    startup_s = smoke_plan(model, port_base).cases[0].startup_timeout_s
    print(f"\nengine dead, API process alive (VLLM::EngineCore killed after ready, {repeats} times):")
    print(f"  afd-e2e (watch: /health, log markers, exit): {', '.join(f'{o:.3f}' for o, _ in deaths)} s")
    print(
        f"    median {ours_median:.3f} s   target <= {DEATH_TARGET_S:g} s  {'met' if ours_median <= DEATH_TARGET_S else 'MISSED'}"
    )
    for _ours, old in deaths:
        seen = f"exit after {old:.1f} s" if old is not None else f"nothing in {watch_old_s:g} s"
        print(f"  before this change (process liveness only): {seen}")
    print(
        f"  so before this change a dead engine during start-up was found only at the start-up timeout: "
        f"{startup_s:g} s here (tiny-cpu budgets.startup_s), {startup_s / ours_median:.0f}x the median above"
    )
    return ours_median <= DEATH_TARGET_S


if __name__ == "__main__":
    sys.exit(main())
