"""Stands in for ``afd-e2e run`` in the cancel test (tests/cancel.bats): the real run record, and real servers
that hold the plan's real ports, ignore SIGTERM and left the runner's session, as vLLM's processes can. On SIGTERM
this runner exits without them: they are pre-exit's to end (how long its teardown took is the test's clock).

    run-leaving-servers.py run --profile P --out DIR [...]      (the argv the command hook gives afd-e2e)
Environment: PORT_BASE (the plan's first port), SERVERS_FILE (where "pid port" lines are written).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from afd_e2e.phases import rendering
from afd_e2e.plan.build import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.runner.hygiene import GpuSnapshot
from afd_e2e.runner.layout import RunLayout
from afd_e2e.runner.run_record import RunRecord
from afd_e2e.system.markers import marker_env, new_run_id

rendering.install_renderers()  # the built-in phases and their renderers: this script runs cases as `afd-e2e run` does

SERVER = (
    "import os, signal, socket, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "s = socket.socket(); s.bind(('127.0.0.1', int(os.environ['HOLD_PORT']))); s.listen(); time.sleep(600)"
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["run"])
    parser.add_argument("--out", type=Path, required=True)
    args, _ = parser.parse_known_args()
    plan = build_plan(
        load_profile("tiny-cpu"),
        model_path="/nonexistent",
        case_ids=["cpu-tp1"],
        port_base=int(os.environ["PORT_BASE"]),
    )
    run_id = new_run_id()
    record = RunRecord.start(
        RunLayout.for_run(args.out, run_id), run_id, plan, GpuSnapshot(unavailable="no GPU in this test"), set()
    )
    (case,) = plan.cases
    lines = []
    for port in case.ports:
        env = {**os.environ, **marker_env(run_id, case.id, "server"), "HOLD_PORT": str(port)}
        server = subprocess.Popen([sys.executable, "-c", SERVER], env=env, start_new_session=True)
        record.add_process(case.id, "server", server.pid)
        lines.append(f"{server.pid} {port}")
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # held for sigwait from now on (its servers run)
    Path(os.environ["SERVERS_FILE"]).write_text("\n".join(lines) + "\n", encoding="utf-8")

    signal.sigwait({signal.SIGTERM})  # the cancel: a teardown that ends without its servers
    sys.exit(1)


if __name__ == "__main__":
    main()
