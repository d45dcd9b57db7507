"""A follower's side of a case placed on several agents: the one process it hosts, through the case runner.

The follower runs the case like the leader does (``runner/case.py``: launch, watch, forensics, teardown, hygiene,
results.json), with one process and no phases of its own. It publishes where it listens, waits for the addresses
its process needs (``budgets.rendezvous_s``), launches it and publishes its readiness (agent, host, ports, pids,
identity); then it watches its process (death, the watchdog's stall, judged in the phase the leader publishes)
until the leader says the case is over, the run ended, or its heartbeat stopped (a leader killed outright: the
follower then fails). What it sees goes to build meta-data at once (``state``), so the leader fails within seconds
naming this agent; it beats too while it runs; its records are uploaded as artifacts for the leader's merge.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path

from afd_e2e.buildkite import artifacts, meta_data
from afd_e2e.buildkite.env import agent_name, job_id
from afd_e2e.multi_agent.agent import listen_address
from afd_e2e.multi_agent.board import (
    DIED,
    ENDED,
    RUNNING,
    STALLED,
    Board,
    Readiness,
    RendezvousFailed,
    RoleState,
    case_ended,
)
from afd_e2e.multi_agent.identity import AgentIdentity, identity_of
from afd_e2e.multi_agent.lifecycle import ENDED as LEADER_ENDED
from afd_e2e.multi_agent.lifecycle import (
    LOST_AFTER_S,
    Heartbeat,
    LeaderLost,
    Pulse,
    beat_every_s,
    heartbeat_key,
    leader_state_key,
)
from afd_e2e.plan.addresses import LISTEN_HOST, meta_data_key, placeholders, rendezvous_variable, resolve_case
from afd_e2e.plan.model import CasePlan, ProcessPlan
from afd_e2e.preflight.software import read_installed
from afd_e2e.results.model import CaseResults, PreflightCheck
from afd_e2e.results.status import Status
from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.server import CaseServers

WATCH_S = 0.2  # how often its own process is checked
LEADER_EVERY_S = 1.0  # how often the leader's phase (or end) is read (each read is a buildkite-agent call)
# how often the leader's run state (ended without ending the case: a crash) and heartbeat are read; more often when
# the leader beats more often (``read_every_s``): a reader slower than the beat would find its leader lost late
RUN_EVERY_S = 5.0
WIND_DOWN_S = 15.0  # a failure seen here: how long the leader gets to stop its requests before this process stops
STALL_TRIGGERS = ("stall", "startup")


def records_name(leader_job: str, case_id: str, process: str) -> str:
    """The follower's records folder by default (the plugin's ``run_dir`` names it the same): its name is the
    artifacts' path, unique in the build."""
    return f"follower-{leader_job}-{case_id}-{process}"


class Follower:
    """The follower job hosting ``process`` of a case for the leader job ``leader_job``."""

    def __init__(
        self,
        leader_job: str,
        process: str,
        env: Mapping[str, str],
        *,
        model_path: str,
        rendezvous_s: float,
        heartbeat_lost_s: float = LOST_AFTER_S,
        progress: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``heartbeat_lost_s``: how long the leader may be silent before it is lost; this follower beats every
        sixth of it, as its leader expects (it reads the same profile). ``clock``: what the wind-down before the
        teardown (``case_over``) and the leader's silence are measured on (tests drive it)."""
        self.leader_job, self.process, self.env = leader_job, process, env
        self.clock = clock
        self.agent, self.job = agent_name(env), job_id(env) or "local"
        self.model_path, self.rendezvous_s, self.progress = model_path, rendezvous_s, progress
        self.board: Board | None = None
        self.host = ""
        self.identity: AgentIdentity | None = None
        self.flag, self.deadline = CancelFlag(), 0.0
        self.beat_every_s = beat_every_s(heartbeat_lost_s)
        self.read_every_s = min(RUN_EVERY_S, self.beat_every_s)
        self.pulse, self.run_read_at = Pulse(clock(), after_s=heartbeat_lost_s), float("-inf")
        self.run_gone: str | None = None  # why the leader's run is over (it ended, or its heartbeat stopped)
        self.leader_lost = False  # its heartbeat stopped: nobody else will end the case
        self.heartbeat: Heartbeat | None = None  # this follower's own beat, from joining to its end (``collect``)

    waits_ready = False
    runs_phases = False

    def hosted(self, case: CasePlan) -> frozenset[str]:
        return frozenset({self.process})

    def _process(self, case: CasePlan) -> ProcessPlan:
        return next(p for p in case.processes if p.name == self.process)

    def join(
        self, servers: CaseServers, flag: CancelFlag, record_checks: Callable[[Sequence[PreflightCheck]], None]
    ) -> None:
        """Publish where this process listens and what this agent runs (the leader compares and records it:
        ``record_checks`` is not called here); wait for the other addresses it needs; fill them in, and launch only
        once every process before it in the plan has (``_before_launch``)."""
        case = servers.case
        process = self._process(case)
        assert process.placement is not None
        self.board = board = Board(self.leader_job, case.id)
        self.flag, self.deadline = flag, time.monotonic() + self.rendezvous_s
        self.heartbeat = Heartbeat(board.heartbeat_key(self.process), self.beat_every_s)
        self.heartbeat.start()
        listen = process.placement.listen_host
        if placeholders(listen):
            listen = listen_address(process.placement.interface, self.env)
        self.host = listen
        executable = servers.executables.get(process.argv[0]) or process.argv[0]
        self.identity = identity_of(self.agent, self.process, read_installed(executable), self.model_path)
        board.publish_host(self.process, listen)
        board.publish_identity(self.process, self.identity)
        values = {LISTEN_HOST: listen, rendezvous_variable(self.process): listen}
        for variable in sorted({v for arg in process.argv for v in placeholders(arg)} - set(values)):
            key = case.rendezvous[variable]
            self.progress(f"rendezvous: waiting for {variable} (meta-data {key})")
            values[variable] = self._wait(lambda k=key: board.get(meta_data_key(self.leader_job, k)), variable)
        resolved = resolve_case(case, values, self.hosted(case))
        servers.join(resolved, (), listen, before_each=partial(self._before_launch, resolved))

    def _before_launch(self, case: CasePlan, process: ProcessPlan) -> None:
        """Launch order across agents: every process before this one in the plan has launched (its readiness)."""
        assert self.board is not None
        board = self.board
        for earlier in case.processes[: case.processes.index(process)]:
            self.progress(f"rendezvous: waiting for {earlier.name} to launch first")
            self._wait(lambda name=earlier.name: board.get(board.key(name, "ready")), f"{earlier.name}'s launch")

    def _wait(self, read: Callable[[], str | None], what: str) -> str:
        """``read``'s value once published within the rendezvous budget; the leader's run ending, a cancel or the
        budget ends the wait."""
        while (value := read()) is None:
            self.flag.check()
            if (why := self._leader_gone()) is not None:
                raise RendezvousFailed(f"rendezvous: {why} before {what}")
            if time.monotonic() > self.deadline:
                raise RendezvousFailed(
                    f"rendezvous: no {what} within budgets.rendezvous_s = {self.rendezvous_s:g} s "
                    f"(follower of leader job {self.leader_job} on agent {self.agent}, hosting {self.process})"
                )
            self.flag.wait(0.5)
        return value

    def launched(self, servers: CaseServers) -> None:
        """Readiness: where the process is, what it runs and on which agent."""
        assert self.board is not None and self.identity is not None
        process = self._process(servers.case)
        pids = tuple(s.pid for s in servers.servers)
        ready = Readiness(self.agent, self.job, self.host, process.ports, pids, self.identity)
        self.board.publish_ready(self.process, ready)
        self.board.publish_state(self.process, RoleState(RUNNING))
        self.progress(f"ready: {self.process} on agent {self.agent} at {self.host}, pids {list(pids)}")

    def _leader_gone(self) -> str | None:
        """Why to stop when the leader's run ended without ending its case (a crash) or its heartbeat stopped (a
        SIGKILL, a lost agent); None while it runs. Read every ``read_every_s`` at most (two buildkite-agent calls)."""
        now = self.clock()
        if self.run_gone is None and now - self.run_read_at >= self.read_every_s:
            self.run_read_at = now
            state = meta_data.get(leader_state_key(self.leader_job))
            if state is not None and state.startswith(LEADER_ENDED):
                self.run_gone = f"the leader's run ended ({state.partition(':')[2] or 'ended'})"
            elif (lost := self.pulse.lost(meta_data.get(heartbeat_key(self.leader_job)), now)) is not None:
                self.run_gone, self.leader_lost = f"leader job {self.leader_job}: {lost}", True
        return self.run_gone

    def follow(self, servers: CaseServers, flag: CancelFlag) -> None:
        """Watch this agent's process until the leader ends the case; raises EngineDied, Stalled, Cancelled or
        LeaderLost (its heartbeat stopped: nobody else will end this case)."""
        assert self.board is not None
        phase, read_at = "startup", 0.0
        while True:
            flag.check()
            servers.check()
            servers.check_progress()
            if time.monotonic() - read_at >= LEADER_EVERY_S:
                read_at = time.monotonic()
                now = self.board.phase() or phase
                if (ended := case_ended(now)) is not None:
                    self.progress(f"the leader's case ended ({ended}): tearing down")
                    return
                if (why := self._leader_gone()) is not None:
                    self.progress(f"{why}: tearing down")
                    if self.leader_lost:
                        raise LeaderLost(why)
                    return
                if now != phase:
                    phase = now
                    servers.mark(phase)
            flag.wait(WATCH_S)

    def mark(self, phase: str) -> None:
        """The follower's phases are the leader's (``follow``)."""

    def case_over(self, results: CaseResults) -> None:
        """After a failure seen here (a death, a stall), before this agent's teardown: the leader's requests to this
        process are still open until it winds its phase down, and a vLLM server stopped under open requests waits
        on them (a stalled engine never answers: SIGKILL). So wait, up to WIND_DOWN_S, for the leader to end its
        case, as a local case winds its work down before its teardown. Not on a cancel (the agent's own grace
        period is short) nor for a leader that is gone. The follower's end is published once its records are
        (``collect``)."""
        if self.board is None or results.status is not Status.FAILED or self.run_gone is not None:
            return
        board, deadline = self.board, self.clock() + WIND_DOWN_S
        self.progress(f"waiting up to {WIND_DOWN_S:g} s for the leader to end its requests before the teardown")
        while self.clock() < deadline and case_ended(board.phase()) is None and self._leader_gone() is None:
            if self.flag.wait(0.5):
                return

    def failed(self, results: CaseResults, trigger: str | None) -> None:
        """A death or a stall seen here, or this job cancelled, published at once: the leader fails within seconds
        naming this agent."""
        if self.board is None:
            return
        if results.status is Status.CANCELLED:
            state = RoleState(ENDED, f"{results.status}: {results.failure or 'cancelled'}")
        else:
            state = RoleState(STALLED if trigger in STALL_TRIGGERS else DIED, results.failure or str(results.status))
        self.board.publish_state(self.process, state)

    def collect(self, case: CasePlan, results: CaseResults, out_dir: Path) -> None:
        """After the teardown: the state says how it ended, unless a failure already said it; no more beats."""
        if self.heartbeat is not None:
            self.heartbeat.stop()
        if self.board is None:
            return
        state = self.board.state(self.process)
        if state is None or state.kind == RUNNING:
            self.board.publish_state(self.process, RoleState(ENDED, str(results.status)))

    def run_over(self, status: Status) -> None:
        """Nothing: the records are uploaded once they are rendered (``upload``)."""

    def upload(self, out_dir: Path, case_id: str) -> str | None:
        """Upload the follower's records (results folder) and say where they are; a warning when it failed."""
        name = out_dir.name
        problem = artifacts.upload_artifacts(f"{name}/**/*", out_dir.parent)
        if self.board is None:
            self.board = Board(self.leader_job, case_id)
        self.board.publish_records(self.process, f"{name}/**/*")
        return problem
