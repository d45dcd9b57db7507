"""The leader's side of a case placed on several agents: rendezvous, remote watch, end, merged records.

Before its own processes start, the leader publishes ``waiting`` and its own processes' addresses, uploads one
follower step per placed process (``pipeline/followers.py``, when its step was generated: ``AFD_E2E_PLUGIN``), and
waits (``budgets.rendezvous_s``)
for every follower's readiness; it checks that every agent runs the same software (a mismatch fails the case naming
both sides), fills the rendezvous addresses into the plan and watches each remote role (``remote.py``) with its own:
a follower silent for ``budgets.heartbeat_lost_s`` is lost, and the leader beats every sixth of it for its followers.
When its case is over (passed, failed, cancelled) it publishes that, so the followers tear down; it then downloads
their records (results.json, logs, stacks, uploaded as artifacts) and merges them into its own results.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path

from afd_e2e.buildkite import artifacts, meta_data
from afd_e2e.buildkite.env import agent_name
from afd_e2e.errors import UsageError
from afd_e2e.multi_agent.agent import listen_address
from afd_e2e.multi_agent.board import Board, Readiness, RendezvousFailed, wait_for
from afd_e2e.multi_agent.identity import AgentIdentity, checks, identity_of
from afd_e2e.multi_agent.lifecycle import (
    LOST_AFTER_S,
    RUNNING,
    WAITING,
    Heartbeat,
    beat_every_s,
    ended,
    heartbeat_key,
    leader_state_key,
)
from afd_e2e.multi_agent.merge import merge_follower
from afd_e2e.multi_agent.remote import RemoteRole
from afd_e2e.pipeline import upload as pipeline_upload
from afd_e2e.pipeline.followers import PLUGIN_ENV, LeaderJob, follower_pipeline
from afd_e2e.plan.addresses import LISTEN_HOST, rendezvous_variable, resolve_case
from afd_e2e.plan.model import CasePlan, ProcessPlan
from afd_e2e.preflight.software import read_installed
from afd_e2e.profile import Profile
from afd_e2e.results.model import CaseResults, CheckRecord, PreflightCheck
from afd_e2e.results.status import Status
from afd_e2e.results.store import results_from_json
from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.server import CaseServers

RECORDS_WAIT_S = 60.0  # after the follower's own teardown budget: how long its records may take to arrive
FOLLOWERS_DIR = "followers"  # below the leader's results folder: each follower's downloaded records


class Leader:
    """The leader job ``job`` of one run: its agent, its listen address, its identity (read once)."""

    def __init__(
        self,
        job: str,
        env: Mapping[str, str],
        *,
        interface: str | None,
        model_path: str,
        profile: Profile | None = None,  # with its reference as the plugin loaded it: to upload follower steps
        profile_ref: str = "",
        rendezvous_s: float,
        teardown_s: float,
        heartbeat_lost_s: float = LOST_AFTER_S,
        progress: Callable[[str], None],
    ) -> None:
        """``heartbeat_lost_s``: how long a follower may be silent before it is lost; the leader beats every sixth
        of it, as its followers expect (they read the same profile)."""
        self.job, self.env, self.agent = job, env, agent_name(env)
        self.interface, self.model_path = interface, model_path
        self.profile, self.profile_ref = profile, profile_ref
        self.rendezvous_s, self.teardown_s, self.heartbeat_lost_s = rendezvous_s, teardown_s, heartbeat_lost_s
        self.progress = progress
        self.board: Board | None = None
        self._identity: AgentIdentity | None = None
        self.ready: dict[str, Readiness] = {}
        self.remote: dict[str, RemoteRole] = {}  # the case's remote roles as the watch sees them
        self.listen = ""
        self.deadline = 0.0
        self.flag = CancelFlag()
        self.placed = False  # a placed case ran: the run's end is published
        # from the first rendezvous to the run's end
        self.heartbeat = Heartbeat(heartbeat_key(job), beat_every_s(heartbeat_lost_s))

    waits_ready = True
    runs_phases = True

    def hosted(self, case: CasePlan) -> frozenset[str]:
        return frozenset(p.name for p in case.leader_processes)

    def identity(self, executable: str) -> AgentIdentity:
        if self._identity is None:
            self._identity = identity_of(self.agent, "leader", read_installed(executable), self.model_path)
        return self._identity

    def join(
        self, servers: CaseServers, flag: CancelFlag, record_checks: Callable[[Sequence[PreflightCheck]], None]
    ) -> None:
        """Wait for every follower of ``servers.case`` to join (its address and identity); record the same-software
        checks (``record_checks``: the run's preflight); give ``servers`` the case with its addresses filled in,
        the remote roles to watch and the launch order to keep. Raises RendezvousFailed (the agent and the role
        named) or Cancelled."""
        case = servers.case
        self.placed, self.board, self.ready, self.flag = True, Board(self.job, case.id), {}, flag
        meta_data.set_value(leader_state_key(self.job), WAITING)
        self.heartbeat.start()
        self.listen = listen = listen_address(self.interface, self.env)
        for process in case.leader_processes:
            if rendezvous_variable(process.name) in case.rendezvous:
                self.board.publish_host(process.name, listen)
        self._upload_followers(case)
        self.deadline = time.monotonic() + self.rendezvous_s
        joined = {}
        for process in case.remote_processes:
            self.progress(f"rendezvous: waiting for {process.name} ({_follower(process)})")
            joined[process.name] = self._wait(process, "identity")
        try:
            identities = {
                n: AgentIdentity.from_meta_data(text, self.board.key(n, "identity")) for n, text in joined.items()
            }
        except UsageError as exc:  # a follower of another afd-e2e, or something else wrote there: the case fails
            raise RendezvousFailed(f"rendezvous: {exc}") from exc
        ours = self.identity(servers.executables.get(case.processes[0].argv[0]) or case.processes[0].argv[0])
        same_software = checks([ours, *identities.values()])
        record_checks(same_software)
        if mismatched := [c.measured for c in same_software if c.status is Status.FAILED]:
            raise RendezvousFailed("same software: " + "; ".join(mismatched))
        hosts = {n: self.board.host(n) or "" for n in identities}
        for name, identity in identities.items():
            self.progress(f"rendezvous: {name} joined on agent {identity.agent} at {hosts[name]}")
        values = {LISTEN_HOST: listen, **{rendezvous_variable(n): host for n, host in hosts.items()}}
        self.remote = {
            p.name: RemoteRole(
                p.name,
                identities[p.name].agent,
                f"http://{hosts[p.name]}:{p.api_port}/health",
                self.board,
                ready_at=time.monotonic(),
                lost_after_s=self.heartbeat_lost_s,
            )
            for p in case.remote_processes
        }
        order = partial(self._before_launch, servers)
        servers.join(
            resolve_case(case, values, self.hosted(case)), list(self.remote.values()), listen, before_each=order
        )

    def _upload_followers(self, case: CasePlan) -> None:
        """One follower step per placed process, added to the build while the leader waits (after ``waiting``, so
        a follower never finds its leader not yet there). A leader run outside a generated step uploads none: its
        followers are started by hand (``afd-e2e join --follow``)."""
        if self.profile is None or not self.env.get(PLUGIN_ENV):
            self.progress(
                f"no {PLUGIN_ENV} (not a generated leader step): no follower step uploaded; start each follower with "
                f"afd-e2e join --leader-job {self.job} --follow {case.id}/<process> --profile <profile>"
            )
            return
        leader = LeaderJob.from_env(self.env, self.profile_ref or self.profile.name)
        pipeline_upload.upload_pipeline(follower_pipeline(self.profile, case, leader, self.env))
        self.progress(f"rendezvous: uploaded {len(case.remote_processes)} follower step(s)")

    def _before_launch(self, servers: CaseServers, process: ProcessPlan) -> None:
        """Launch order across agents (the connector's, node 0 first): every process before ``process`` in the
        plan has launched, on whichever agent it runs."""
        self._publish_ready(servers)
        for earlier in servers.case.processes[: servers.case.processes.index(process)]:
            if earlier.placement is not None and earlier.name not in self.ready:
                self.ready[earlier.name] = self._readiness(earlier)

    def _publish_ready(self, servers: CaseServers) -> None:
        """The readiness of each of this agent's processes launched so far (what a follower launching after it
        waits for)."""
        assert self.board is not None and self._identity is not None
        for server in servers.servers:
            process = next(p for p in servers.case.processes if p.name == server.name)
            ready = Readiness(self.agent, self.job, self.listen, process.ports, (server.pid,), self._identity)
            self.board.publish_ready(server.name, ready)

    def _readiness(self, process: ProcessPlan) -> Readiness:
        assert self.board is not None
        self._wait(process, "ready")
        ready = self.board.ready(process.name)
        assert ready is not None
        if tuple(ready.ports) != tuple(process.ports):  # else the leader would wait out budgets.startup_s
            raise RendezvousFailed(
                f"rendezvous: {process.name} launched on agent {ready.agent} on ports "
                f"{', '.join(map(str, ready.ports))}, where the leader's plan has "
                f"{', '.join(map(str, process.ports))}; fix: start the follower with the leader's --profile and "
                "--port-base (afd-e2e join --follow CASE/PROCESS ...)"
            )
        self.progress(f"rendezvous: {process.name} launched on agent {ready.agent}, pids {list(ready.pids)}")
        return ready

    def _wait(self, process: ProcessPlan, what: str) -> str:
        """``<case>/<process>/<what>`` once published within the rendezvous budget; a follower that failed first
        (its launch, its own rendezvous) ends the wait at once with its reason."""
        assert self.board is not None
        board = self.board

        def published_or_failed() -> str | None:
            found = board.get(board.key(process.name, what))
            if found is None and (state := board.state(process.name)) is not None and state.failed:
                raise RendezvousFailed(
                    f"rendezvous: {process.name} ({_follower(process)}) {state.kind}: {state.detail}"
                )
            return found

        found = wait_for(published_or_failed, self.deadline - time.monotonic(), (self.flag.check,))
        if found is not None:
            return found
        host = board.host(process.name)
        how = f"joined at {host} but did not launch it" if host and what == "ready" else "never joined"
        raise RendezvousFailed(
            f"rendezvous: {process.name} ({_follower(process)}) {how} within budgets.rendezvous_s = "
            f"{self.rendezvous_s:g} s (leader job {self.job} on agent {self.agent})"
        )

    def launched(self, servers: CaseServers) -> None:
        """Every process of the case launched, on every agent: the leader runs."""
        self._publish_ready(servers)
        for process in servers.case.remote_processes:
            if process.name not in self.ready:
                self.ready[process.name] = self._readiness(process)
        meta_data.set_value(leader_state_key(self.job), RUNNING)

    def mark(self, phase: str) -> None:
        if self.board is not None:
            self.board.publish_phase(phase)

    def case_over(self, results: CaseResults) -> None:
        """The case is over on the leader: its followers tear down."""
        if self.board is not None:
            self.board.publish_end(str(results.status))

    def failed(self, results: CaseResults, trigger: str | None) -> None:
        """A failure on the leader ends the followers as its end does (``case_over``)."""

    def collect(self, case: CasePlan, results: CaseResults, out_dir: Path) -> None:
        """Every follower's records downloaded and merged into ``results``; one that does not arrive in time is a
        failed check naming its agent."""
        if self.board is None:
            return
        board = self.board
        for process in case.remote_processes:
            ready = self.ready.get(process.name)
            if ready is None:  # never launched: nothing of it to merge
                continue
            agent = ready.agent
            if (role := self.remote.get(process.name)) is not None and role.lost:
                detail = "none: its follower was lost (its heartbeat stopped), nothing will upload them"
                results.hygiene.append(CheckRecord("records", Status.FAILED, detail, agent=agent))
                continue
            glob = wait_for(lambda p=process.name: board.records(p), self.teardown_s + RECORDS_WAIT_S)
            if glob is None:
                waited = self.teardown_s + RECORDS_WAIT_S
                results.hygiene.append(
                    CheckRecord("records", Status.FAILED, f"no records uploaded within {waited:g} s", agent=agent)
                )
                continue
            into = out_dir / FOLLOWERS_DIR
            problem = artifacts.download_artifacts(glob, into)
            folder = into / glob.split("*", 1)[0].rstrip("/")
            try:
                follower = results_from_json(_read_json(folder / "results.json"), str(folder / "results.json"))
            except (OSError, ValueError) as exc:
                detail = problem or f"{type(exc).__name__}: {exc}"
                results.hygiene.append(CheckRecord("records", Status.FAILED, detail, agent=agent))
                continue
            merge_follower(results, follower.cases[case.id], folder.relative_to(out_dir).as_posix(), agent)
        self.board = None

    def run_over(self, status: Status) -> None:
        """The run ended: any follower still to start finds nothing to join (``lifecycle``)."""
        self.heartbeat.stop()
        if self.placed:
            meta_data.set_value(leader_state_key(self.job), ended(str(status)))


def _follower(process: ProcessPlan) -> str:
    assert process.placement is not None
    return f"a follower job on an agent with {process.placement.pool}"


def _read_json(path: Path) -> object:
    import json

    return json.loads(path.read_text(encoding="utf-8"))
