"""One case's servers held up for a block of code: launched as the plan says, stopped and cleaned at the end.

For tests and benchmarks that need a live case outside a whole ``afd-e2e run`` (e.g. to point lm-eval at it);
the same launch, readiness, teardown and leftover-file pieces as a run, without its bookkeeping.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from afd_e2e.errors import UsageError
from afd_e2e.plan.model import CasePlan
from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.child_env import child_environment
from afd_e2e.runner.hygiene import remove_leftover_files, shm_entries
from afd_e2e.runner.markers import find_marked, marker_env, new_run_id
from afd_e2e.runner.processes import ServerProcess, launch
from afd_e2e.runner.readiness import wait_until_ready
from afd_e2e.runner.teardown import terminate
from afd_e2e.system.executables import resolve_executable
from afd_e2e.system.ports import busy_ports


@contextmanager
def serving(case: CasePlan, work_dir: Path) -> Iterator[list[ServerProcess]]:
    """Yield the case's running servers once its API answers; logs go to ``work_dir/<case>-<process>.log``."""
    busy = busy_ports(case.ports)
    if busy:
        held = ", ".join(f"port {port} is held by {who}" for port, who in busy.items())
        raise UsageError(f"{held} (needed by case {case.id})", "stop that process or use another port base")
    run_id = new_run_id()
    scratch = work_dir / "scratch" / case.id
    scratch.mkdir(parents=True, exist_ok=True)
    shm_before = shm_entries()
    servers: list[ServerProcess] = []
    try:
        for process in case.processes:
            env = child_environment(
                os.environ,
                process,
                scratch=scratch,
                cache=work_dir / ".cache",
                markers=marker_env(run_id, case.id, process.name),
                out_dir=work_dir,
            )
            argv = (resolve_executable(process.argv[0]), *process.argv[1:])
            servers.append(launch(process.name, argv, env, work_dir / f"{case.id}-{process.name}.log"))
        wait_until_ready(case.ready_url, servers, case.startup_timeout_s, CancelFlag())
        yield servers
    finally:
        terminate(partial(find_marked, run_id, case.id), case.teardown_grace_s)
        for server in servers:
            server.reap()
        remove_leftover_files(scratch, shm_before)
