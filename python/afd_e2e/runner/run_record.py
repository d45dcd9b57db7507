"""The run record (``DIR/run-record.json``): what ``afd-e2e cleanup`` needs to find and verify a run's leftovers.

Written before anything is launched and updated the moment each process starts, so it is complete even when the
runner itself is killed: the run id (the marker every child carries), the runner's pid, the plan's ports and
devices, the GPU memory and shared-memory entries seen before the run, and the scratch folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil

from afd_e2e.errors import UsageError
from afd_e2e.plan.addresses import placeholders
from afd_e2e.plan.model import CasePlan, RunPlan
from afd_e2e.results import write_json_atomic
from afd_e2e.runner.hygiene import GpuSnapshot
from afd_e2e.runner.layout import RECORD_FILE, RunLayout
from afd_e2e.system.ports import ANY_HOST


@dataclass
class RunRecord:
    path: Path
    data: dict[str, Any]

    @classmethod
    def start(
        cls,
        layout: RunLayout,
        run_id: str,
        plan: RunPlan,
        gpu: GpuSnapshot,
        shm_before: set[str],
        hosted: Callable[[CasePlan], Collection[str]] | None = None,
    ) -> RunRecord:
        """``hosted``: the processes of a case this agent runs (default: those not placed on another agent); only
        their ports are this agent's to check, on every interface where the address is another agent's to fill."""
        here = {case.id: hosted(case) if hosted else {p.name for p in case.leader_processes} for case in plan.cases}
        hosts = {ANY_HOST if placeholders(case.base_url) else urlsplit(case.base_url).hostname for case in plan.cases}
        data = {
            "run_id": run_id,
            "runner": {"pid": os.getpid(), "create_time": psutil.Process().create_time()},
            "out_dir": str(layout.out_dir),
            "scratch_root": str(layout.scratch_root),
            "host": hosts.pop() if len(hosts) == 1 else "127.0.0.1",
            "ports": sorted(
                {port for c in plan.cases for p in c.processes if p.name in here[c.id] for port in p.ports}
            ),
            "devices": list(plan.devices),
            "gpu_baseline_mib": {str(i): used for i, used in gpu.used_mib.items()},
            "gpu_unavailable": gpu.unavailable,
            "shm_before": sorted(shm_before),
            "processes": [],
        }
        record = cls(layout.record_path, data)
        record.flush()
        return record

    @classmethod
    def load(cls, out_dir: Path) -> RunRecord | None:
        path = out_dir / RECORD_FILE
        try:
            return cls(path, json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError) as exc:
            raise UsageError(
                f"{path} is unreadable: {exc}", "remove it and stop leftovers by hand (see its pids)"
            ) from exc

    def flush(self) -> None:
        write_json_atomic(self.path, self.data)

    def add_process(self, case_id: str, name: str, pid: int) -> None:
        self.data["processes"].append({"case": case_id, "name": name, "pid": pid})
        self.flush()

    @property
    def run_id(self) -> str:
        return self.data["run_id"]

    @property
    def gpu_baseline(self) -> GpuSnapshot:
        used = {int(i): mib for i, mib in self.data["gpu_baseline_mib"].items()}
        return GpuSnapshot(used, unavailable=self.data["gpu_unavailable"])

    def runner_process(self) -> psutil.Process | None:
        """The runner that wrote this record, if that very process (same start time) is still alive."""
        runner = self.data["runner"]
        try:
            proc = psutil.Process(runner["pid"])
            return proc if abs(proc.create_time() - runner["create_time"]) < 0.01 and proc.pid != os.getpid() else None
        except psutil.Error:
            return None
