"""Stalls on the real CPU vLLM (tiny-cpu with ``budgets.stall_s`` = 5 s, half the profile's: each stall costs CI its
length): an engine held inside its step by the fault plugin (``tests/fault_plugin``; the test releases it once the
case's teardown begins) and an EngineCore stopped with SIGSTOP are each reported as a stall within twice ``stall_s``
of the last token (``VERDICT_LIMIT_S``; the product's tight figure, ``stall_s`` + 2 s, is measured by
``benchmarks/lifecycle.py --parts stall``), naming the process that explains it, with forensics taken; an engine whose
every step takes ``stall_s``/3 passes with no stall. After each, hygiene is clean and nothing of the run is left.

Three vLLM launches, one per engine fault (each is set in the engine's environment at its launch, and a stall
ends its case's server). The slow-step run, which passes, is also cancelled in its teardown: the cancel-per-phase
test's teardown phase (``tests/cancel_support.py``), on a launch it needs anyway.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.profile.bench_spec import bench_spec
from afd_e2e.results.store import results_to_json
from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.run import execute_run
from afd_e2e.system.markers import find_marked
from afd_e2e.telemetry.sampler import read_telemetry
from cancel_support import assert_cancelled_everywhere
from stall_support import LastToken, VerdictClock, bench_processes, stop_engine_mid_bench

# the most vLLM servers this module starts (tests/launch_counter.py): one per engine fault: hung step, SIGSTOP, slow
# steps
LAUNCHES = 3

pytestmark = pytest.mark.engine

PORT_BASE = 22400  # this module's block: 22400 (hang), 22420 (SIGSTOP), 22440 (slow steps)
PROFILE = load_profile("tiny-cpu")
STALL_S = 5.0
# From the last token to the verdict: stall_s of quiet, counted from the first 1 s sample that saw the last token
# move: 6.6 s measured on 2 cores at load average 10, 0.4 s inside stall_s + 2 s (the promise, which
# benchmarks/lifecycle.py --parts stall measures). Twice stall_s keeps a loaded machine's late samples and polls
# inside, and still fails a watchdog that waits out a second window, or a stall left to the repetition's budget
# (300 s) or the request's (60 s).
VERDICT_LIMIT_S = 2 * STALL_S
# A short bench, so slow steps finish in seconds: one initial request, then 4 prompts of 4 tokens, 4 at a time.
SHORT_BENCH = dataclasses.replace(
    bench_spec(PROFILE), input_len=16, output_len=4, num_prompts=4, max_concurrency=4, warmups=0, repetitions=1
)
SHORT = dataclasses.replace(
    PROFILE, workloads={**PROFILE.workloads, "bench": SHORT_BENCH}, budgets=PROFILE.budgets.replaced(stall_s=STALL_S)
)
# The SIGSTOP's bench: traffic for seconds (16 answers of 64 tokens, 4 at a time), so the engine stopped while it has
# requests running always leaves some unanswered, however late a loaded machine lets the stop land.
LONG_BENCH = dataclasses.replace(SHORT_BENCH, num_prompts=16, output_len=64)
LONG = dataclasses.replace(SHORT, workloads={**SHORT.workloads, "bench": LONG_BENCH})
needs_plugin = pytest.mark.skipif(
    importlib.util.find_spec("afd_e2e_fault_plugin") is None,
    reason="the fault plugin is not installed: pip install -e tests/fault_plugin (scripts/test does)",
)


def one_case_plan(model: Path, port_base: int, profile=SHORT):
    plan = build_plan(profile, model_path=str(model), case_ids=["cpu-tp1"], port_base=port_base)
    return dataclasses.replace(plan, cases=(dataclasses.replace(plan.cases[0], phases=("performance",)),))


class CancelAtTeardown(VerdictClock):
    """The verdict clock that also cancels the run (as SIGTERM would) the moment a case's teardown begins."""

    def __init__(self, flag: CancelFlag) -> None:
        super().__init__()
        self.flag = flag
        self.entered: list[str] = []

    def enter(self, case_id, phase, logs=()):
        self.entered.append(phase)
        if phase == "teardown" and not self.flag.is_set():
            self.flag.cancel("cancelled by SIGTERM")
        super().enter(case_id, phase, logs)


def run_stalled(
    model: Path,
    out: Path,
    port: int,
    clock: VerdictClock | None = None,
    flag: CancelFlag | None = None,
    profile=SHORT,
) -> tuple[dict, VerdictClock, LastToken]:
    clock, last = clock or VerdictClock(), LastToken(port)
    try:
        plan = one_case_plan(model, port, profile)
        data = results_to_json(execute_run(profile, plan, out, progress=clock, flag=flag))
    finally:
        last.stop()
    return data, clock, last


def assert_clean_after(data: dict, out: Path, port: int) -> None:
    case = data["cases"]["cpu-tp1"]
    hygiene = {c["check"]: c["status"] for c in case["hygiene"]}
    assert all(status in ("passed", "skipped") for status in hygiene.values()), case["hygiene"]  # skipped: no GPU
    run_id = json.loads((out / "run-record.json").read_text())["run_id"]
    assert find_marked(run_id) == []
    assert bench_processes(port) == []


def stall_of(data: dict) -> dict:
    stalls = data["cases"]["cpu-tp1"]["telemetry"]["stalls"]
    assert len(stalls) == 1, stalls
    return stalls[0]


class ReleaseAtTeardown(VerdictClock):
    """The verdict clock that releases the fault plugin's hang (creates its release file) the moment the case's
    teardown begins: the stall verdict and its forensics were taken on the held engine, and the teardown then
    stops an engine that steps again."""

    def __init__(self, release: Path) -> None:
        super().__init__()
        self.release = release

    def enter(self, case_id, phase, logs=()):
        if phase == "teardown":
            self.release.touch()
        super().enter(case_id, phase, logs)


@needs_plugin
def test_an_engine_hung_in_its_step_is_a_stall_named_within_twice_stall_s(tiny_model, tmp_path, monkeypatch):
    release = tmp_path / "release-the-engine"
    monkeypatch.setenv("AFD_E2E_FAULT_HANG_AFTER_STEPS", "3")
    monkeypatch.setenv("AFD_E2E_FAULT_RELEASE_FILE", str(release))
    data, clock, last = run_stalled(tiny_model, tmp_path, PORT_BASE, ReleaseAtTeardown(release))
    case = data["cases"]["cpu-tp1"]

    assert case["status"] == "failed"
    assert case["failure"].startswith("engine stalled during performance: "), case["failure"]
    assert "requests in flight, no token for" in case["failure"]
    assert "EngineCore" in case["failure"] and "is sleeping" in case["failure"], case["failure"]
    assert last.at is not None and clock.stalled_at is not None
    print(f"hung engine: stall named {clock.stalled_at - last.at:.1f} s after the last token")
    assert clock.stalled_at - last.at <= VERDICT_LIMIT_S, clock.stalled_at - last.at
    assert stall_of(data)["phase"] == "performance" and stall_of(data)["in_flight"] >= 1
    forensics = case["forensics"][0]
    assert forensics["trigger"] == "stall"
    engine = [p for p in forensics["processes"] if "EngineCore" in p["name"]]
    assert engine, forensics
    dump = (tmp_path / engine[0]["path"]).read_text()
    assert "afd_e2e_injected_hang" in dump, dump[-2000:]  # taken while the test still held the engine
    assert release.exists() and case["processes"][0]["forced_kill"] is False  # released, then stopped on SIGTERM
    timeline = read_telemetry(tmp_path / case["telemetry"]["path"])
    assert timeline.header["case"] == "cpu-tp1" and timeline.samples
    assert [phase for _, phase in timeline.marks] == ["startup", "performance"]
    assert [message for _, message in timeline.stalls] == [case["failure"]]
    assert (tmp_path / "plots" / "telemetry-cpu-tp1.png").stat().st_size > 0
    assert_clean_after(data, tmp_path, PORT_BASE)


def test_a_stopped_engine_core_is_a_stall_naming_it_stopped(tiny_model, tmp_path):
    port = PORT_BASE + 20
    stopped = stop_engine_mid_bench(tmp_path, "server", port, within_s=300)
    data, clock, last = run_stalled(tiny_model, tmp_path, port, profile=LONG)
    case = data["cases"]["cpu-tp1"]

    assert stopped, "the EngineCore was never stopped"
    assert case["status"] == "failed"
    assert case["failure"].startswith("engine stalled during performance: "), case["failure"]
    assert f"pid {stopped['pid']} is stopped" in case["failure"], case["failure"]
    assert clock.stalled_at is not None and last.at is not None
    print(f"stopped EngineCore: stall named {clock.stalled_at - last.at:.1f} s after the last token")
    assert clock.stalled_at - last.at <= VERDICT_LIMIT_S, clock.stalled_at - last.at
    assert case["forensics"][0]["trigger"] == "stall"
    assert_clean_after(data, tmp_path, port)


@needs_plugin
def test_an_engine_slowed_to_a_third_of_stall_s_per_step_passes_with_no_stall(tiny_model, tmp_path, monkeypatch):
    """Cancelled in its teardown: the case, whose work was done, passes; the run is cancelled everywhere."""
    monkeypatch.setenv("AFD_E2E_FAULT_SLOW_STEP_S", f"{STALL_S / 3:g}")
    flag = CancelFlag()
    data, clock, _last = run_stalled(tiny_model, tmp_path, PORT_BASE + 40, CancelAtTeardown(flag), flag)
    case = data["cases"]["cpu-tp1"]

    assert case["status"] == "passed", case["failure"]
    assert case["telemetry"]["stalls"] == []
    assert clock.stalled_at is None
    # the steps really were slow: the bench's own wall time is at least its steps' injected sleeps
    repetition = case["performance"]["repetitions"][0]
    assert repetition["status"] == "passed"
    assert repetition["metrics"]["mean_tpot_ms"] >= 0.9 * STALL_S / 3 * 1000, repetition["metrics"]
    assert_clean_after(data, tmp_path, PORT_BASE + 40)
    assert "teardown" in clock.entered
    saved = assert_cancelled_everywhere(tmp_path, "cpu-tp1", "teardown")
    assert saved == json.loads(json.dumps(data))
