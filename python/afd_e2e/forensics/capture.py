"""Forensics of a case: every live process's state and stacks at the moment a failure is detected.

Called on a death, a stall, a budget timeout or a start-up that does not move, before the case is torn down.
Every process of the case (``system/process_state``: API servers, EngineCore and workers of every role) is dumped
with py-spy concurrently, all within ``DEADLINE_S``; each dump is written to ``forensics/<case>/<role>-<pid>.txt``
with the process's state, threads and CPU time, and a process that cannot be dumped is named with the reason.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from pathlib import Path
from typing import Protocol

from afd_e2e.forensics.pyspy import BUSY_FRAMES, ZOMBIE, Dump, busy_thread, dump, find_pyspy
from afd_e2e.results.model import CaseForensics, ProcessDump
from afd_e2e.results.store import now_iso
from afd_e2e.system.child_env import client_environment
from afd_e2e.system.markers import marker_env
from afd_e2e.system.process_state import ProcessState, case_processes

DEADLINE_S = 10.0  # every dump of a case, concurrently
FOLDER = "forensics"


class Trigger(str, Enum):
    """What made the harness take forensics."""

    DEATH = "death"
    STALL = "stall"
    TIMEOUT = "timeout"
    STARTUP = "startup"

    def __str__(self) -> str:
        return self.value


class _Server(Protocol):
    name: str

    @property
    def pid(self) -> int: ...


class _Case(Protocol):
    id: str


class _CaseServers(Protocol):
    """What capture_case needs of ``runner.server.CaseServers``."""

    case: _Case
    servers: Sequence[_Server]
    run_id: str


def case_folder(out_dir: Path, case_id: str) -> Path:
    return out_dir / FOLDER / case_id


def _header(state: ProcessState, case_id: str, trigger: Trigger, reason: str, found: Dump | None) -> str:
    lines = [
        f"afd-e2e forensics ({trigger}): {reason}",
        f"case {case_id}, role {state.role}, pid {state.pid} ({state.name}), parent pid {state.ppid}",
        f"state: {state.status}; CPU time {state.cpu_s:.2f} s; threads {state.threads}",
    ]
    if found is None:
        lines.append("py-spy: not run")
    elif found.mode:
        lines.append(f"py-spy dump mode: {found.mode} ({found.seconds:.2f} s)")
    else:
        lines.append(f"py-spy could not dump it: {found.failure}")
    lines += [f"  tried {note}" for note in found.notes] if found else []
    return "\n".join(lines) + "\n\n"


def _dump_one(pyspy: str | None, state: ProcessState, deadline: float, env: Mapping[str, str] | None) -> Dump | None:
    if pyspy is None or state.zombie:
        return None
    return dump(pyspy, state.pid, stopped=state.stopped, deadline=deadline, env=env)


def _record(state: ProcessState, found: Dump | None, pyspy: str | None, path: str | None) -> ProcessDump:
    record = ProcessDump(
        pid=state.pid,
        role=state.role,
        name=state.name,
        status=state.status,
        cpu_s=state.cpu_s,
        threads=state.threads,
        path=path,
    )
    if state.zombie:
        record.failure = ZOMBIE
    elif pyspy is None:
        record.failure = "py-spy is not installed (pip install 'py-spy>=0.4.3,<0.5')"
    elif found is not None:
        record.mode, record.failure, record.seconds = found.mode, found.failure, round(found.seconds, 3)
        busy = busy_thread(found.text) if found.text else None
        if busy is not None:
            record.busy_thread, record.busy_frames = busy.header, list(busy.frames[:BUSY_FRAMES])
    return record


def capture_processes(
    states: Iterable[ProcessState],
    *,
    case_id: str,
    trigger: Trigger | str,
    reason: str,
    out_dir: Path,
    deadline_s: float = DEADLINE_S,
    find: Callable[[], str | None] = find_pyspy,
    env: Mapping[str, str] | None = None,
) -> CaseForensics:
    """Dump ``states`` concurrently within ``deadline_s`` and write one file per process (see the module doc);
    ``find`` says where py-spy is (None: not installed); ``env``: py-spy's environment (the run's markers)."""
    trigger = Trigger(trigger)
    started = time.monotonic()
    deadline = started + deadline_s
    states = list(states)
    pyspy = find()
    taken_at = now_iso()
    with ThreadPoolExecutor(max_workers=max(1, len(states)), thread_name_prefix="afd-e2e-forensics") as pool:
        dumps = list(pool.map(lambda s: _dump_one(pyspy, s, deadline, env), states))
    folder = case_folder(out_dir, case_id)
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for state, found in zip(states, dumps, strict=True):
        path = folder / f"{state.role}-{state.pid}.txt"
        path.write_text(_header(state, case_id, trigger, reason, found) + (found.text if found and found.text else ""))
        records.append(_record(state, found, pyspy, str(path.relative_to(out_dir))))
    nccl = folder / "nccl"
    return CaseForensics(
        trigger=trigger.value,
        reason=reason,
        taken_at=taken_at,
        seconds=round(time.monotonic() - started, 3),
        processes=records,
        nccl_traces=sorted(str(p.relative_to(out_dir)) for p in nccl.glob("*") if p.is_file()),
    )


def capture_case(
    servers: _CaseServers, *, trigger: Trigger | str, reason: str, out_dir: Path, deadline_s: float = DEADLINE_S
) -> CaseForensics:
    """Forensics of every live process of ``servers``' case (every role), written under ``out_dir/forensics/``."""
    states = case_processes((server.name, server.pid) for server in servers.servers)
    env = client_environment(os.environ, markers=marker_env(servers.run_id, servers.case.id, "py-spy"))
    return capture_processes(
        states, case_id=servers.case.id, trigger=trigger, reason=reason, out_dir=out_dir, deadline_s=deadline_s, env=env
    )
