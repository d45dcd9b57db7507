"""Where a run's processes are found again: every child carries marker variables in its environment.

A process group is not enough: vLLM's workers may start their own session, and orphans are re-parented to init.
The environment is inherited by every descendant and readable from /proc, so a scan finds the whole tree, except
where a process rewrote it: vLLM renames its EngineCore and workers with setproctitle, which overwrites their
``/proc/<pid>/environ``. Those are found as members of their server's session (every server starts its own), so a
leftover EngineCore whose API server is gone is still found (``find_run``).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

import psutil

from afd_e2e.system.process_state import role_processes

RUN_ID_ENV = "AFD_E2E_RUN_ID"
CASE_ENV = "AFD_E2E_CASE"
PROCESS_ENV = "AFD_E2E_PROCESS"


def new_run_id() -> str:
    """Short enough for socket paths, random enough that two runs on one agent never collide."""
    return secrets.token_hex(6)


def marker_env(run_id: str, case_id: str, process: str) -> dict[str, str]:
    return {RUN_ID_ENV: run_id, CASE_ENV: case_id, PROCESS_ENV: process}


@dataclass(frozen=True)
class MarkedProcess:
    process: psutil.Process
    case_id: str
    name: str  # the ProcessPlan name whose tree it belongs to

    def describe(self) -> str:
        try:
            return f"pid {self.process.pid} ({self.process.name()})"
        except psutil.Error:
            return f"pid {self.process.pid}"


def find_marked(run_id: str, case_id: str | None = None) -> list[MarkedProcess]:
    """Live processes of a run (optionally one case), this process excluded; zombies count as gone."""
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            env = proc.environ()
        except psutil.Error:  # gone, a zombie, or not ours to read
            continue
        if env.get(RUN_ID_ENV) != run_id or (case_id is not None and env.get(CASE_ENV) != case_id):
            continue
        found.append(MarkedProcess(proc, env.get(CASE_ENV, ""), env.get(PROCESS_ENV, "")))
    return found


def _started_since(process: psutil.Process, since: float | None) -> bool:
    try:
        return since is None or process.create_time() >= since - 1.0
    except psutil.Error:
        return False


def find_run(
    run_id: str, servers: Iterable[tuple[str, str, int]], case_id: str | None = None, *, since: float | None = None
) -> list[MarkedProcess]:
    """``find_marked``, plus the live members of each server's session (``(case, name, pid)`` of the servers
    launched; ``since``: the run's start, so a process that merely reuses a pid is left alone): the processes
    whose markers setproctitle hid."""
    found = {m.process.pid: m for m in find_marked(run_id, case_id)}
    for case, name, pid in servers:
        if case_id is not None and case != case_id:
            continue
        for proc in role_processes(pid):
            if proc.pid not in found and is_alive(proc) and _started_since(proc, since):
                found[proc.pid] = MarkedProcess(proc, case, name)
    return [found[pid] for pid in sorted(found)]


def is_alive(process: psutil.Process) -> bool:
    """Running and not a zombie (a zombie holds no memory, ports or files)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
