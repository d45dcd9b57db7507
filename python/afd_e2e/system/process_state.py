"""The one home for the OS state of a case's processes: which processes a case has, by role, and what each is doing.

A case's server (``vllm serve``: native server, Attention or FFN) is started in its own session, so its leader's pid
is the session id of everything it starts. vLLM renames its EngineCore and worker children with setproctitle, which
overwrites their ``/proc/<pid>/environ``: the run markers are not readable on them. So a role's processes are its
server, the server's descendants, and whatever else is in the server's session (a child re-parented to init keeps its
session). The watchdog, the forensics and the hygiene checks all ask here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

# psutil's status names (running, sleeping, disk-sleep, stopped, tracing-stop, zombie, dead, idle, ...)
MIB = 1 << 20
STOPPED_STATUSES = frozenset({psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP})


@dataclass(frozen=True)
class ProcessState:
    """One process of a case as the OS sees it: ``role`` is the plan name of the server it belongs to."""

    pid: int
    role: str
    name: str  # the process title (vLLM's children: EngineCore_DP0, VLLM::Worker_TP0, ...)
    status: str  # psutil's: running, sleeping, disk-sleep, stopped, zombie, ...
    cpu_s: float  # user + system CPU time so far
    threads: int
    ppid: int
    leader: bool  # the server process the harness launched (the role's API process)
    # CPU time of the children it has waited for: the compilers (g++, nvcc) an engine blocks on while it compiles
    children_cpu_s: float = 0.0
    # how long its main thread has been runnable but waiting for a CPU (the kernel's schedstat run delay; 0 where the
    # kernel keeps none): a process starved by a busy machine, not one that has nothing to do
    run_delay_s: float = 0.0
    # resident memory in MiB: what the soak's leak verdict follows per role (0 for a zombie or where unreadable)
    rss_mib: float = 0.0

    @property
    def stopped(self) -> bool:
        """SIGSTOPped (or held by a tracer): alive and never moving on its own."""
        return self.status in STOPPED_STATUSES

    @property
    def zombie(self) -> bool:
        return self.status == psutil.STATUS_ZOMBIE

    def describe(self) -> str:
        """``ffn EngineCore_DP0 pid 123 is stopped``: the words a failure message uses."""
        return f"{self.role} {self.name} pid {self.pid} is {self.status}"


def read_state(process: psutil.Process, role: str, *, leader: bool = False) -> ProcessState | None:
    """The state of one process, or None when it is gone (a zombie is kept: its status says so)."""
    try:
        with process.oneshot():
            times = process.cpu_times()
            status = process.status()
            return ProcessState(
                pid=process.pid,
                role=role,
                name=process.name(),
                status=status,
                cpu_s=round(times.user + times.system, 3),
                threads=process.num_threads() if status != psutil.STATUS_ZOMBIE else 0,
                ppid=process.ppid(),
                leader=leader,
                children_cpu_s=round(times.children_user + times.children_system, 3),
                run_delay_s=run_delay_s(process.pid),
                rss_mib=round(process.memory_info().rss / MIB, 1) if status != psutil.STATUS_ZOMBIE else 0.0,
            )
    except psutil.ZombieProcess:
        return ProcessState(process.pid, role, _name(process), psutil.STATUS_ZOMBIE, 0.0, 0, _ppid(process), leader)
    except psutil.Error:
        return None


def run_delay_s(pid: int, proc: Path = Path("/proc")) -> float:
    """Seconds the process's main thread has waited on a run queue (``/proc/<pid>/schedstat``: CPU time, run delay
    and timeslices, in ns); 0.0 where the file is missing or unreadable (a kernel without schedstat, a process
    gone)."""
    try:
        fields = (proc / str(pid) / "schedstat").read_text(encoding="ascii").split()
        return round(int(fields[1]) / 1e9, 3)
    except (OSError, IndexError, ValueError):
        return 0.0


def _name(process: psutil.Process) -> str:
    try:
        return process.name()
    except psutil.Error:
        return "?"


def _ppid(process: psutil.Process) -> int:
    try:
        return process.ppid()
    except psutil.Error:
        return 0


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def role_processes(leader_pid: int) -> list[psutil.Process]:
    """The server ``leader_pid`` and every process it started: its descendants, plus the members of the session it
    leads (re-parented ones, also once the server itself is gone)."""
    found: dict[int, psutil.Process] = {}
    if _session(leader_pid) == leader_pid:  # still the server that started its own session, not a reused pid
        try:
            leader = psutil.Process(leader_pid)
            found = {leader.pid: leader, **{child.pid: child for child in leader.children(recursive=True)}}
        except psutil.Error:
            found = {}
    for proc in psutil.process_iter():
        if proc.pid not in found and proc.pid != os.getpid() and _session(proc.pid) == leader_pid:
            found[proc.pid] = proc
    return [found[pid] for pid in sorted(found)]


def case_processes(
    servers: Iterable[tuple[str, int]], *, members: Callable[[int], list[psutil.Process]] = role_processes
) -> list[ProcessState]:
    """Every process of a case with its role, from ``(role, server pid)`` pairs; the server first in each role,
    gone processes left out (zombies stay, their status says so). ``members``: how a role's processes are found
    (the telemetry sampler passes a cached ``role_processes``: the scan of every process is its dearest part)."""
    states: list[ProcessState] = []
    seen: set[int] = set()
    for role, leader_pid in servers:
        found = []
        for proc in members(leader_pid):
            if proc.pid not in seen and (state := read_state(proc, role, leader=proc.pid == leader_pid)) is not None:
                seen.add(proc.pid)
                found.append(state)
        states += sorted(found, key=lambda s: (not s.leader, s.pid))
    return states
