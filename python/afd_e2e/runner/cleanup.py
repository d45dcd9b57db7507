"""``afd-e2e cleanup``: end whatever a run left behind (found by its record and markers) and verify the machine.

The plugin's pre-exit hook calls it after every job, also a cancelled one, so it must be safe when nothing is left:
then every check simply passes. A runner that is somehow still alive is stopped first (its own SIGTERM handling
tears down its servers and writes its results), then anything still carrying the run's marker. A results.json that
still says ``running`` once its runner is gone (SIGKILL, a lost agent) is closed as ``interrupted``, saying when and
how that was found, so its report never shows a run in progress forever.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from afd_e2e.errors import UsageError
from afd_e2e.results.model import CheckRecord, Interruption
from afd_e2e.results.status import Status
from afd_e2e.results.store import RESULTS_FILE, load_results, now_iso, results_to_json, write_json_atomic
from afd_e2e.runner.cancellation import CANCEL_GRACE_S
from afd_e2e.runner.hygiene import (
    GPU_SETTLE_S,
    PORT_SETTLE_S,
    check_gpu_memory,
    check_ports,
    check_processes,
    record,
    remove_leftover_files,
)
from afd_e2e.runner.run_record import RunRecord
from afd_e2e.runner.teardown import POLL_INTERVAL_S, terminate
from afd_e2e.runner.verdict import decide_verdict
from afd_e2e.system.markers import find_run, is_alive

RUNNER_GRACE_S = CANCEL_GRACE_S + 5.0  # its teardown grace plus time to write results


class _Budget:
    """Waits that fit ``within_s`` seconds (a cancelled job's grace period): each takes at most a share of what is
    left on ``clock``, so the SIGKILLs and the port and GPU checks still happen before the deadline. No budget: the
    defaults."""

    def __init__(self, within_s: float | None, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.deadline = None if within_s is None else clock() + within_s

    def wait(self, default_s: float, share: float) -> float:
        if self.deadline is None:
            return default_s
        return max(0.0, min(default_s, (self.deadline - self.clock()) * share))


def _stop_runner(
    run: RunRecord, grace_s: float, clock: Callable[[], float], sleep: Callable[[float], None]
) -> CheckRecord:
    """SIGTERM the runner and poll until it is gone, SIGKILL it once ``grace_s`` has passed on ``clock``: its
    teardown and last write take real time, so the grace is read on the clock a test drives (as every other wait
    here), never on a loaded machine's wall clock."""
    runner = run.runner_process()
    if runner is None:
        return record("runner", Status.PASSED, "the runner has exited")
    runner.terminate()
    deadline = clock() + grace_s
    while is_alive(runner) and clock() < deadline:
        sleep(POLL_INTERVAL_S)
    if is_alive(runner):
        runner.kill()
        return record("runner", Status.WARNED, f"runner pid {runner.pid} ignored SIGTERM for {grace_s:.1f} s: killed")
    return record("runner", Status.WARNED, f"runner pid {runner.pid} was still running: stopped with SIGTERM")


def clean_up(
    out_dir: Path,
    within_s: float | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[CheckRecord]:
    """Stop and remove a run's leftovers (within ``within_s`` seconds on ``clock`` when given); return check records
    (``failed`` means the machine is still not clean). Every wait reads ``clock`` and sleeps with ``sleep``."""
    budget = _Budget(within_s, clock)
    run = RunRecord.load(out_dir)
    if run is None:
        return [record("run", Status.PASSED, f"no run record in {out_dir}: nothing to clean")]
    servers = [(p["case"], p["name"], p["pid"]) for p in run.data["processes"]]
    find = partial(find_run, run.run_id, servers, since=run.data["runner"]["create_time"])
    checks = [_stop_runner(run, budget.wait(RUNNER_GRACE_S, 0.3), clock, sleep)]
    leftovers = find()
    outcome = terminate(find, budget.wait(CANCEL_GRACE_S, 0.4), clock=clock, sleep=sleep)
    if leftovers:
        names = ", ".join(m.describe() for m in leftovers)
        how = "some needed SIGKILL" if outcome.forced else "all stopped on SIGTERM"
        checks.append(
            record("leftovers", Status.WARNED, f"ended {len(leftovers)} processes of run {run.run_id} ({how}): {names}")
        )
    checks += [
        check_processes(find),
        check_ports(
            run.data["ports"], run.data["host"], settle_s=budget.wait(PORT_SETTLE_S, 0.3), clock=clock, sleep=sleep
        ),
        check_gpu_memory(run.gpu_baseline, settle_s=budget.wait(GPU_SETTLE_S, 0.5), clock=clock, sleep=sleep),
        remove_leftover_files(Path(run.data["scratch_root"]), run.data["shm_before"]),
    ]
    closed = close_abandoned(out_dir, run, checks[0])
    return [*checks, closed] if closed else checks


def close_abandoned(out_dir: Path, run: RunRecord, runner: CheckRecord) -> CheckRecord | None:
    """Mark a results.json that still says ``running`` after its runner is gone as ``interrupted``."""
    if not (out_dir / RESULTS_FILE).exists():
        return None
    try:
        results = load_results(out_dir)
    except UsageError as exc:
        return record("results", Status.WARNED, f"not closed: {exc.problem}")
    if results.status is not Status.RUNNING:
        return None
    state = "had exited" if runner.status is Status.PASSED else "had to be stopped: " + runner.detail
    how = (
        f"the runner of run {run.run_id} (pid {run.data['runner']['pid']}) {state} while results.json still said "
        "running (SIGKILL or a lost agent); found by afd-e2e cleanup"
    )
    results.interruption = Interruption(found_at=now_iso(), how=how)
    for case in results.cases.values():
        if case.status is Status.RUNNING:
            case.status, case.failure = Status.INTERRUPTED, case.failure or "the runner vanished while this case ran"
    results.verdict = decide_verdict(results, interrupted=how)
    results.status = results.verdict.status
    write_json_atomic(out_dir / RESULTS_FILE, results_to_json(results))
    return record("results", Status.WARNED, f"results.json marked interrupted: {how}")
