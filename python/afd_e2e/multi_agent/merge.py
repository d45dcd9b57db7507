"""One report for a case spread over agents: a follower's records merged into the leader's results of the case.

Its processes join the leader's (each says which agent it ran on; its log's path is re-rooted below the leader's
results folder, where the follower's artifacts were downloaded), its hygiene checks are named after its agent, its
forensics and telemetry come along, and a failure on the follower fails the leader's case when nothing else did.
"""

from __future__ import annotations

import copy
from dataclasses import replace

from afd_e2e.results.model import CaseResults
from afd_e2e.results.status import Status


def _rooted(prefix: str, path: str | None) -> str | None:
    return f"{prefix}/{path}" if path else path


def merge_follower(leader: CaseResults, follower: CaseResults, prefix: str, agent: str) -> None:
    """Merge ``follower`` (its results of the case, files under ``prefix`` below the leader's results folder)."""
    for process in follower.processes:
        leader.processes.append(replace(process, log=_rooted(prefix, process.log) or "", agent=process.agent or agent))
    where = f"{', '.join(p.name for p in follower.processes) or 'follower'} on agent {agent}"
    leader.hygiene += [replace(c, agent=c.agent or agent) for c in follower.hygiene]
    for taken in follower.forensics:
        taken = copy.deepcopy(taken)
        for dump in taken.processes:
            dump.path = _rooted(prefix, dump.path)
        taken.nccl_traces = [_rooted(prefix, t) or t for t in taken.nccl_traces]
        leader.forensics.append(taken)
    telemetry = follower.section("telemetry")
    if telemetry is not None and leader.section("telemetry") is None:
        leader.set_section("telemetry", replace(telemetry, path=_rooted(prefix, telemetry.path)))
    if follower.status.is_failure and leader.status is Status.PASSED:
        leader.status = Status.FAILED
        leader.failure = f"{where}: {follower.failure or follower.status}"
        leader.log_tail = follower.log_tail
    elif follower.status is Status.FAILED and leader.status is Status.FAILED and follower.log_tail:
        leader.log_tail = leader.log_tail or follower.log_tail
