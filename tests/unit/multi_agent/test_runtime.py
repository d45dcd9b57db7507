"""The run-time side of a case across agents, without an engine: what leader and follower say through build
meta-data (the buildkite-agent stub's shared store), the addresses each fills in, the remote watch's signs, the
identity check at the rendezvous, and the merge of a follower's records into one report."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from afd_e2e.buildkite import meta_data
from afd_e2e.errors import UsageError
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
from afd_e2e.multi_agent.identity import AgentIdentity
from afd_e2e.multi_agent.leader import Leader
from afd_e2e.multi_agent.lifecycle import LOST_AFTER_S, leader_state_key
from afd_e2e.multi_agent.merge import merge_follower
from afd_e2e.multi_agent.remote import RemoteRole
from afd_e2e.plan import build_plan
from afd_e2e.plan.addresses import resolve_case
from afd_e2e.profile import load_profile
from afd_e2e.results.model import (
    CaseForensics,
    CaseResults,
    CheckRecord,
    PreflightCheck,
    ProcessDump,
    ProcessRecord,
)
from afd_e2e.results.status import Status
from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.hygiene import read_gpu_memory
from afd_e2e.runner.layout import RunLayout
from afd_e2e.runner.run_record import RunRecord
from afd_e2e.runner.server import CaseServers
from unit.timing import FakeClock

PROFILE = load_profile("tiny-cpu-two-agents")
CASE = "cpu-tp1-remote"


def loopback_leader(*, rendezvous_s: float, agent: str | None = None, **budgets: float) -> Leader:
    """Leader job job-L listening on 127.0.0.1 (``agent``: its BUILDKITE_AGENT_NAME), saying nothing."""
    env = {"AFD_E2E_LISTEN_HOST": "127.0.0.1", **({"BUILDKITE_AGENT_NAME": agent} if agent else {})}
    return Leader(
        "job-L", env, interface="lo", model_path="/m", rendezvous_s=rendezvous_s, teardown_s=5, progress=len,
        **budgets,
    )  # fmt: skip


def join(leader: Leader, servers: CaseServers, recorded: list[PreflightCheck] | None = None) -> None:
    """The leader's rendezvous, the checks it records kept in ``recorded``; its heartbeat stopped after it."""
    try:
        leader.join(servers, CancelFlag(), (recorded if recorded is not None else []).extend)
    finally:
        leader.heartbeat.stop()


def identity(agent: str, hosts: str, vllm: str = "0.32.0+cpu") -> AgentIdentity:
    return AgentIdentity(agent, hosts, "1.0", vllm, None, "sha256:abc")


def readiness(agent: str = "follower-1", vllm: str = "0.32.0+cpu") -> Readiness:
    return Readiness(agent, "job-f", "127.0.0.1", (18600,), (4242,), identity(agent, "server", vllm))


def test_readiness_round_trips_and_anything_else_names_its_key():
    ready = readiness()
    assert Readiness.from_meta_data(ready.to_meta_data(), "k") == ready
    with pytest.raises(UsageError, match="meta-data k: not a follower's readiness"):
        Readiness.from_meta_data('{"agent": "a"}', "k")


def test_role_state_keeps_its_reason_whatever_it_holds():
    state = RoleState(DIED, "server exited with code 1: ValueError: a: b")
    assert RoleState.from_meta_data(state.to_meta_data()) == state and state.failed
    assert RoleState.from_meta_data("running") == RoleState(RUNNING) and not RoleState(RUNNING).failed


def test_leader_and_follower_meet_below_the_leaders_job_id(build):
    leader, follower = Board("job-L", CASE), Board("job-L", CASE)
    follower.publish_host("server", "10.0.0.2")
    follower.publish_ready("server", readiness())
    follower.publish_state("server", RoleState(RUNNING))
    leader.publish_phase("smoke")
    assert (follower.phase(), case_ended(follower.phase())) == ("smoke", None)
    leader.publish_end("passed")
    assert leader.host("server") == "10.0.0.2" and leader.ready("server") == readiness()
    assert leader.state("server") == RoleState(RUNNING)
    assert case_ended(follower.phase()) == "passed"
    assert leader.host_key("server") == f"afd-e2e/job-L/{CASE}/server/host"  # the plan's rendezvous key
    assert Board("job-other", CASE).phase() is None  # a retried leader never reads this one's keys


def test_each_agent_fills_in_the_addresses_of_what_it_hosts():
    case = build_plan(PROFILE, model_path="/m").case(CASE)
    assert case.base_url == "http://${AFD_E2E_HOST_SERVER}:18600"
    values = {"AFD_E2E_LISTEN_HOST": "10.0.0.1", "AFD_E2E_HOST_SERVER": "10.0.0.2"}

    on_leader = resolve_case(case, values, hosted=())
    assert on_leader.base_url == "http://10.0.0.2:18600" and on_leader.processes == case.processes
    on_follower = resolve_case(case, values, hosted={"server"})
    (server,) = on_follower.processes
    assert "--host" in server.argv and server.argv[server.argv.index("--host") + 1] == "127.0.0.1"  # listen: literal


def test_a_remote_role_dies_when_its_follower_says_so_and_the_cause_is_the_followers(build):
    board = Board("job-L", CASE)
    role = RemoteRole("server", "follower-1", "http://127.0.0.1:9/health", board, ready_at=0.0)
    board.publish_state("server", RoleState(RUNNING))
    assert role.sign_of_death() is None  # running, /health never answered yet: starting
    board.publish_state("server", RoleState(DIED, "server exited with code 1 during the leader's case"))
    role = RemoteRole("server", "follower-1", "http://127.0.0.1:9/health", board, ready_at=0.0)  # reads it at once
    sign = role.sign_of_death()
    assert sign == ("its follower reports it died", None)
    death = role.death(*sign, seen_at=5.0, settle=threading.Event())
    assert death.describe("smoke").startswith("server on agent follower-1 engine died during smoke")
    assert death.cause == "server exited with code 1 during the leader's case"


def test_a_stall_its_follower_found_is_named_a_stall(build):
    board = Board("job-L", CASE)
    board.publish_state("server", RoleState(STALLED, "engine stalled during smoke: 1 requests in flight"))
    role = RemoteRole("server", "follower-1", "http://127.0.0.1:9/health", board, ready_at=0.0)
    death = role.death(*role.sign_of_death(), seen_at=3.0, settle=threading.Event())
    assert death.describe("smoke") == (
        "server on agent follower-1 stalled during smoke (its follower reports it stalled, 3.0 s after launch): "
        "engine stalled during smoke: 1 requests in flight"
    )


def test_a_follower_that_ended_while_the_leader_runs_is_a_death(build):
    board = Board("job-L", CASE)
    board.publish_state("server", RoleState(ENDED, "cancelled"))
    role = RemoteRole("server", "follower-1", "http://127.0.0.1:9/health", board, ready_at=0.0)
    assert role.sign_of_death() == ("its follower reports it ended", None)


def test_a_follower_whose_heartbeat_stopped_is_lost_though_its_server_may_still_answer(build):
    """Its afd-e2e killed outright: no state will come, and nothing watches its process on its agent."""
    board = Board("job-L", CASE)
    board.set(board.heartbeat_key("server"), "4")
    clock = FakeClock()  # the silence is the clock's: however long the reads below take, it is 31 s
    ready_at = clock() - LOST_AFTER_S - 1  # ready over 30 s ago
    role = RemoteRole("server", "follower-1", "http://127.0.0.1:9/health", board, ready_at=ready_at, clock=clock)
    role.pulse.value, role.pulse.changed_at = "4", ready_at  # beat 4 seen then, none since
    sign = role.sign_of_death()
    assert sign is not None and sign[0].startswith("its follower's heartbeat stopped (beat 4, nothing new for 31 s")
    settle = threading.Event()
    looked = []
    settle.wait = lambda timeout=None: looked.append(timeout) or False  # type: ignore[method-assign]
    death = role.death(*sign, seen_at=ready_at + 40.0, settle=settle)
    assert looked == []  # no wait for a state that will not come
    assert death.describe("correctness").startswith(
        "server on agent follower-1 lost its follower during correctness (its follower's heartbeat stopped"
    )

    beating = RemoteRole("server", "follower-1", "http://127.0.0.1:9/health", board, ready_at=ready_at, clock=clock)
    board.set(board.heartbeat_key("server"), "5")
    assert beating.sign_of_death() is None  # a new beat: alive


def test_a_remote_role_given_a_shorter_budget_reads_its_followers_beat_and_loses_it_by_it(build):
    """budgets.heartbeat_lost_s = 12, on the leader's own clock: the follower's beat read every 2 s (as often as it
    beats), the follower lost once 12 s pass with no new beat (30 s would still be within)."""
    board = Board("job-L", CASE)
    board.set(board.heartbeat_key("server"), "4")
    clock = FakeClock()
    role = RemoteRole(
        "server", "follower-1", "http://127.0.0.1:9/health", board, ready_at=clock(), lost_after_s=12, clock=clock
    )
    assert role.sign_of_death() is None  # beat 4 seen at 0 s
    clock.advance(12)
    assert role.sign_of_death() is None  # 12 s: just within
    clock.advance(1)
    assert role.sign_of_death() is None and not role.lost  # 13 s, but 1 s after its last read: not read again yet
    clock.advance(1)
    assert role.sign_of_death() == (
        "its follower's heartbeat stopped (beat 4, nothing new for 14 s, over budgets.heartbeat_lost_s = 12 s): "
        "killed, or its agent lost",
        None,
    )
    assert role.lost


def joined_leader(tmp_path, **settings):
    """A loopback leader of CASE that joined its server's follower (host and identity published), its board and
    servers; ``settings`` go to ``loopback_leader``."""
    case = build_plan(PROFILE, model_path="/m").case(CASE)
    leader = loopback_leader(rendezvous_s=5, agent="leader-1", **settings)
    leader._identity = identity("leader-1", "leader")
    board = Board("job-L", CASE)
    board.publish_host("server", "127.0.0.1")
    board.publish_identity("server", identity("follower-1", "server"))
    servers = CaseServers(case, tmp_path / "logs", scratch=tmp_path / "s", cache=tmp_path / "c", hosted=())
    join(leader, servers, [])
    return leader, board, servers


def test_the_leader_beats_and_watches_its_followers_by_its_heartbeat_budget(build, tmp_path):
    """The leader's beat every sixth of budgets.heartbeat_lost_s, and each remote role it watches lost after it."""
    leader, _board, _servers = joined_leader(tmp_path, heartbeat_lost_s=12)
    assert leader.heartbeat.every_s == 2.0
    assert leader.remote["server"].pulse.after_s == 12.0
    assert loopback_leader(rendezvous_s=5).heartbeat.every_s == 5.0  # the default budget: every 5 s, as before


def test_the_rendezvous_fails_naming_both_sides_when_the_follower_runs_other_software(build, tmp_path):
    case = build_plan(PROFILE, model_path="/m").case(CASE)
    leader = loopback_leader(rendezvous_s=5, agent="leader-1")
    leader._identity = identity("leader-1", "leader")  # what the software probe found on the leader
    board = Board("job-L", CASE)
    board.publish_host("server", "127.0.0.1")  # the follower joins: its address and what it runs, nothing launched
    board.publish_identity("server", identity("follower-1", "server", vllm="0.31.0"))
    servers = CaseServers(case, tmp_path / "logs", scratch=tmp_path / "s", cache=tmp_path / "c", hosted=())
    recorded: list[PreflightCheck] = []
    with pytest.raises(RendezvousFailed) as raised:
        join(leader, servers, recorded)
    assert str(raised.value) == (
        "same software: vLLM differs: 0.31.0 on agent follower-1 (server), 0.32.0+cpu on agent leader-1 (leader)"
    )
    # recorded as preflight checks before the case fails: every compared field, the differing one failed
    assert {c.name: c.status for c in recorded} == {
        "same software: afd-e2e": Status.PASSED,
        "same software: vLLM": Status.FAILED,
        "same software: AFD plugin": Status.PASSED,
        "same software: checkpoint": Status.PASSED,
    }


def test_an_identity_that_is_not_one_fails_the_rendezvous_naming_its_key(build, tmp_path):
    case = build_plan(PROFILE, model_path="/m").case(CASE)
    leader = loopback_leader(rendezvous_s=5)
    board = Board("job-L", CASE)
    board.publish_host("server", "127.0.0.1")
    board.set(board.key("server", "identity"), "")  # what another tool (or an older afd-e2e) left there
    servers = CaseServers(case, tmp_path / "logs", scratch=tmp_path / "s", cache=tmp_path / "c", hosted=())
    with pytest.raises(RendezvousFailed) as raised:
        join(leader, servers)
    assert str(raised.value).startswith(
        f"rendezvous: meta-data afd-e2e/job-L/{CASE}/server/identity: not an agent identity"
    ), str(raised.value)


def test_a_follower_that_never_joins_ends_the_rendezvous_at_its_budget_naming_role_and_pool(build, tmp_path):
    case = build_plan(PROFILE, model_path="/m").case(CASE)
    leader = loopback_leader(rendezvous_s=0.5, agent="leader-1")
    servers = CaseServers(case, tmp_path / "logs", scratch=tmp_path / "s", cache=tmp_path / "c", hosted=())
    with pytest.raises(RendezvousFailed) as raised:
        join(leader, servers)
    assert str(raised.value) == (
        "rendezvous: server (a follower job on an agent with queue=afd-e2e-cpu-follower) never joined within "
        "budgets.rendezvous_s = 0.5 s (leader job job-L on agent leader-1)"
    )


def test_a_follower_that_failed_before_it_was_ready_ends_the_rendezvous_at_once_with_its_reason(build, tmp_path):
    case = build_plan(PROFILE, model_path="/m").case(CASE)
    leader = loopback_leader(rendezvous_s=60)
    Board("job-L", CASE).publish_state("server", RoleState(DIED, "ports in use before start: 18600 held by pid 7"))
    servers = CaseServers(case, tmp_path / "logs", scratch=tmp_path / "s", cache=tmp_path / "c", hosted=())
    with pytest.raises(RendezvousFailed) as raised:
        join(leader, servers)
    assert str(raised.value) == (
        "rendezvous: server (a follower job on an agent with queue=afd-e2e-cpu-follower) died: "
        "ports in use before start: 18600 held by pid 7"
    )


def test_a_process_launches_only_after_every_process_before_it_in_the_plan_on_any_agent(build, tmp_path):
    """afd-8a8f: the FFN in a follower job, Attention on the leader: the leader's Attention waits for the FFN's
    readiness (the synchronous connector needs the FFN first), within the rendezvous budget."""
    profile = load_profile("qwen3.5-122b-a10b-two-agents")
    case = build_plan(profile, model_path="/m").case("afd-8a8f")
    env = {"AFD_E2E_LISTEN_HOST": "10.0.0.1", "BUILDKITE_AGENT_NAME": "leader-1"}
    leader = Leader("job-L", env, interface="eth0", model_path="/m", rendezvous_s=1, teardown_s=5, progress=len)
    leader._identity = identity("leader-1", "leader")
    board = Board("job-L", "afd-8a8f")
    board.publish_host("ffn", "10.0.0.2")
    board.publish_identity("ffn", identity("ffn-agent", "ffn"))
    servers = CaseServers(case, tmp_path / "logs", scratch=tmp_path / "s", cache=tmp_path / "c", hosted={"attention"})
    join(leader, servers)
    attention = next(p for p in servers.case.processes if p.name == "attention")
    assert any('"host":"10.0.0.2"' in arg for arg in attention.argv)  # the connector reaches the FFN's agent

    with pytest.raises(RendezvousFailed, match=r"ffn \(.*\) joined at 10.0.0.2 but did not launch it within"):
        servers.before_each(attention)  # its FFN never launched
    ffn = next(p for p in case.processes if p.name == "ffn")
    ready = Readiness("ffn-agent", "job-f", "10.0.0.2", ffn.ports, (7,), identity("ffn-agent", "ffn"))
    board.publish_ready("ffn", ready)
    leader.deadline += 2  # a new budget for the second try
    servers.before_each(attention)
    assert leader.ready == {"ffn": ready}


def test_a_follower_listening_elsewhere_than_the_leaders_plan_fails_the_rendezvous_at_once(build, tmp_path):
    """A follower started with another --port-base (or another profile) launches where the leader never looks:
    said at its readiness, not after budgets.startup_s of polling the wrong port."""
    leader, board, servers = joined_leader(tmp_path)
    board.publish_ready("server", Readiness("follower-1", "job-f", "127.0.0.1", (18620,), (7,), identity("f", "s")))
    with pytest.raises(RendezvousFailed) as raised:
        leader.launched(servers)
    assert str(raised.value) == (
        "rendezvous: server launched on agent follower-1 on ports 18620, where the leader's plan has 18600; fix: "
        "start the follower with the leader's --profile and --port-base (afd-e2e join --follow CASE/PROCESS ...)"
    )


def follower_case(status: Status = Status.PASSED, failure: str | None = None) -> CaseResults:
    results = CaseResults(id=CASE, label="native", kind="native", status=status, failure=failure)
    results.processes.append(ProcessRecord("server", 4242, ["vllm"], log=f"logs/{CASE}/server.log", agent="f-1"))
    results.hygiene.append(CheckRecord("ports", Status.PASSED, "free"))
    dump = ProcessDump(4242, "server", "EngineCore", "stopped", 1.0, 3, path=f"forensics/{CASE}/server-4242.txt")
    results.forensics.append(CaseForensics("death", "died", "now", 0.1, [dump]))
    return results


def test_the_followers_records_join_the_leaders_naming_its_agent():
    leader = CaseResults(id=CASE, label="native", kind="native", status=Status.PASSED)
    leader.hygiene.append(CheckRecord("ports", Status.PASSED, "free"))
    merge_follower(leader, follower_case(), "followers/f", "f-1")

    (process,) = leader.processes
    assert (process.agent, process.log) == ("f-1", f"followers/f/logs/{CASE}/server.log")
    assert [(c.check, c.agent) for c in leader.hygiene] == [("ports", ""), ("ports", "f-1")]
    assert leader.forensics[0].processes[0].path == f"followers/f/forensics/{CASE}/server-4242.txt"
    assert leader.status is Status.PASSED


def test_a_failure_on_the_follower_fails_the_leaders_case_unless_it_already_failed():
    leader = CaseResults(id=CASE, label="native", kind="native", status=Status.PASSED)
    merge_follower(leader, follower_case(Status.FAILED, "hygiene: ports: 18600 held"), "followers/f", "f-1")
    assert (leader.status, leader.failure) == (Status.FAILED, "server on agent f-1: hygiene: ports: 18600 held")

    failed = replace(leader, status=Status.FAILED, failure="server on agent f-1 engine died during smoke")
    merge_follower(failed, follower_case(Status.FAILED, "server exited"), "followers/f", "f-1")
    assert failed.failure == "server on agent f-1 engine died during smoke"


def test_records_are_looked_for_only_from_followers_that_launched(build, tmp_path: Path):
    """A follower that never became ready has nothing to merge: the leader does not wait for its records."""
    case = build_plan(PROFILE, model_path="/m").case(CASE)
    leader = Leader(
        "job-L", {}, interface="lo", model_path="/m", rendezvous_s=1, teardown_s=600, progress=lambda _line: None
    )
    leader.board = Board("job-L", CASE)
    results = CaseResults(id=CASE, label="native", kind="native", status=Status.FAILED)
    leader.collect(case, results, tmp_path)  # returns at once: no 660 s wait
    assert results.hygiene == [] and leader.board is None


def test_an_afd_case_over_three_agents_meets_with_each_side_filling_in_the_others_addresses(build, tmp_path):
    """qwen3.5-122b-a10b-two-agents afd-16a8f: the FFN on the leader, Attention DP16 over two follower agents (node 0
    serves the API). The leader publishes the FFN's address, each follower its own; the leader's plan then reaches
    the API on node 0's agent, its FFN listens on its own address, and both Attention processes are watched."""
    profile = load_profile("qwen3.5-122b-a10b-two-agents")
    case = build_plan(profile, model_path="/m").case("afd-16a8f")
    env = {"AFD_E2E_LISTEN_HOST": "10.0.0.1", "BUILDKITE_AGENT_NAME": "leader-1"}
    leader = Leader("job-L", env, interface="eth0", model_path="/m", rendezvous_s=5, teardown_s=5, progress=len)
    leader._identity = identity("leader-1", "leader")
    board = Board("job-L", "afd-16a8f")
    for process, host in (("attention", "10.0.0.2"), ("attention-node1", "10.0.0.3")):
        board.publish_host(process, host)
        board.publish_identity(process, identity(f"agent-{host}", process))
    servers = CaseServers(case, tmp_path / "logs", scratch=tmp_path / "s", cache=tmp_path / "c", hosted={"ffn"})

    join(leader, servers)
    assert servers.before_each is not None
    servers.before_each(next(p for p in servers.case.processes if p.name == "ffn"))  # first in the plan: no wait

    assert board.host("ffn") == "10.0.0.1"  # what the Attention followers wait for
    assert servers.case.base_url == "http://10.0.0.2:18240" and servers.host == "10.0.0.1"
    ffn = next(p for p in servers.case.processes if p.name == "ffn")
    assert "10.0.0.1" in ffn.argv and not any("${" in arg for arg in ffn.argv)
    attention = next(p for p in servers.case.processes if p.name == "attention")
    assert attention == next(p for p in case.processes if p.name == "attention")  # its follower fills it in
    assert [r.name for r in servers.remote] == [
        "attention on agent agent-10.0.0.2",
        "attention-node1 on agent agent-10.0.0.3",
    ]
    on_node1 = resolve_case(
        case,
        {"AFD_E2E_LISTEN_HOST": "10.0.0.3", "AFD_E2E_HOST_ATTENTION": "10.0.0.2", "AFD_E2E_HOST_FFN": "10.0.0.1"},
        hosted={"attention-node1"},
    )
    node1 = next(p for p in on_node1.processes if p.name == "attention-node1")
    assert "10.0.0.2" in node1.argv  # --data-parallel-address: node 0's agent
    assert any('"host":"10.0.0.1"' in arg for arg in node1.argv)  # the AFD connector: the FFN on the leader


def test_a_generated_leader_step_uploads_one_follower_step_per_placed_process_once_it_waits(build, tmp_path):
    """The follower finds its leader waiting (lifecycle), with the rendezvous in its step's env."""
    case = build_plan(PROFILE, model_path="/m").case(CASE)
    env = {
        "AFD_E2E_LISTEN_HOST": "127.0.0.1",
        "BUILDKITE_AGENT_NAME": "leader-1",
        "BUILDKITE_BUILD_ID": "build-1",
        "BUILDKITE_JOB_ID": "job-L",
        "AFD_E2E_PLUGIN": "acme/afd-e2e#v1.0.0",
    }
    leader = Leader(
        "job-L", env, interface="lo", model_path="/m", profile=PROFILE, profile_ref="tiny-cpu-two-agents",
        rendezvous_s=0.2, teardown_s=5, progress=len,
    )  # fmt: skip
    servers = CaseServers(case, tmp_path / "logs", scratch=tmp_path / "s", cache=tmp_path / "c", hosted=())
    with pytest.raises(RendezvousFailed, match="never joined"):
        join(leader, servers)

    (uploaded,) = (build / "store" / "pipelines").glob("*.yml")
    (step,) = yaml.safe_load(uploaded.read_text())["steps"]
    assert step["plugins"] == [{"acme/afd-e2e#v1.0.0": {"profile": "tiny-cpu-two-agents", "follow": f"{CASE}/server"}}]
    assert step["env"]["AFD_E2E_LEADER_JOB"] == "job-L" and step["agents"] == {"queue": "afd-e2e-cpu-follower"}
    assert meta_data.get(leader_state_key("job-L")) == "waiting"


def test_a_leader_run_by_hand_uploads_no_follower_step_and_says_how_to_start_one(build, tmp_path):
    case = build_plan(PROFILE, model_path="/m").case(CASE)
    said: list[str] = []
    leader = Leader(
        "job-L", {"AFD_E2E_LISTEN_HOST": "127.0.0.1"}, interface="lo", model_path="/m", profile=PROFILE,
        rendezvous_s=0.2, teardown_s=5, progress=said.append,
    )  # fmt: skip
    servers = CaseServers(case, tmp_path / "logs", scratch=tmp_path / "s", cache=tmp_path / "c", hosted=())
    with pytest.raises(RendezvousFailed):
        join(leader, servers)
    assert not (build / "store" / "pipelines").exists()
    assert f"afd-e2e join --leader-job job-L --follow {CASE}/<process>" in said[0]


def test_each_agents_run_record_holds_only_its_own_ports_for_cleanup(tmp_path):
    """``afd-e2e cleanup`` on an agent checks the ports its processes used, on every interface (the case's API
    address is another agent's); the leader of tiny-cpu-two-agents hosts none of them."""
    plan = build_plan(PROFILE, model_path="/m")
    layout = RunLayout(tmp_path, tmp_path / "scratch", tmp_path / "cache")
    gpu = read_gpu_memory(())
    on_leader = RunRecord.start(layout, "run-1", plan, gpu, set())
    on_follower = RunRecord.start(layout, "run-2", plan, gpu, set(), hosted=lambda case: {"server"})
    assert (on_leader.data["host"], on_leader.data["ports"]) == ("0.0.0.0", [])
    assert (on_follower.data["host"], on_follower.data["ports"]) == ("0.0.0.0", [18600])
