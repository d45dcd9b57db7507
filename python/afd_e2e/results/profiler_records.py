"""The record of the profiler phase in ``results.json``: each role's torch profiler trace and which of them are
uploaded, under the case's ``profiler`` key (written by ``afd_e2e.phases.profiler``, shown by
``report/profiler_report.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from afd_e2e.results.status import Status

SECTION = "profiler"


@dataclass
class TraceFile:
    role: str
    path: str  # traces/<case>/<role>/... (profiles/<case>/<role>/... in results written before the rename)
    size_bytes: int
    uploaded: bool = False  # within the profile's upload cap, newest first


@dataclass
class RoleTrace:
    role: str
    status: Status
    detail: str


@dataclass
class ProfilerResult:
    """The AFD profiler's traces: one check per role, every trace file, and which of them are uploaded."""

    status: Status
    failure: str | None
    upload_limit_mib: float
    roles: list[RoleTrace] = field(default_factory=list)
    traces: list[TraceFile] = field(default_factory=list)
