"""``afd-e2e cleanup``: end whatever a run left behind (found by its record and markers) and verify the machine.

The plugin's pre-exit hook calls it after every job, also a cancelled one, so it must be safe when nothing is left:
then every check simply passes. A runner that is somehow still alive is stopped first (its own SIGTERM handling
tears down its servers), then anything still carrying the run's marker.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import psutil

from afd_e2e.runner.cancellation import CANCEL_GRACE_S
from afd_e2e.runner.hygiene import check_gpu_memory, check_ports, check_processes, record, remove_leftover_files
from afd_e2e.runner.markers import find_marked
from afd_e2e.runner.record import RunRecord
from afd_e2e.runner.teardown import terminate

RUNNER_GRACE_S = CANCEL_GRACE_S + 5.0  # its teardown grace plus time to write results


def _stop_runner(run: RunRecord) -> dict[str, str]:
    runner = run.runner_process()
    if runner is None:
        return record("runner", "pass", "the runner has exited")
    runner.terminate()
    _, alive = psutil.wait_procs([runner], timeout=RUNNER_GRACE_S)
    if alive:
        runner.kill()
        return record("runner", "warn", f"runner pid {runner.pid} ignored SIGTERM for {RUNNER_GRACE_S:.0f} s: killed")
    return record("runner", "warn", f"runner pid {runner.pid} was still running: stopped with SIGTERM")


def clean_up(out_dir: Path) -> list[dict[str, str]]:
    """Stop and remove a run's leftovers; return check records (``fail`` means the machine is still not clean)."""
    run = RunRecord.load(out_dir)
    if run is None:
        return [record("run", "pass", f"no run record in {out_dir}: nothing to clean")]
    find = partial(find_marked, run.run_id)
    checks = [_stop_runner(run)]
    leftovers = find()
    outcome = terminate(find, CANCEL_GRACE_S)
    if leftovers:
        names = ", ".join(m.describe() for m in leftovers)
        how = "some needed SIGKILL" if outcome.forced else "all stopped on SIGTERM"
        checks.append(
            record("leftovers", "warn", f"ended {len(leftovers)} processes of run {run.run_id} ({how}): {names}")
        )
    checks += [
        check_processes(find),
        check_ports(run.data["ports"], run.data["host"]),
        check_gpu_memory(run.gpu_baseline),
        remove_leftover_files(Path(run.data["scratch_root"]), run.data["shm_before"]),
    ]
    return checks
