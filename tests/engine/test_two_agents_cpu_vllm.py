"""One case across two agents on the real CPU vLLM (tiny-cpu-two-agents): the server in a follower job, the
workloads in the leader job, over 127.0.0.1. Each "agent" is a separate ``afd-e2e`` process in its own working
folder, with the buildkite-agent stub on PATH and one shared store standing in for the build (meta-data and
artifacts): the leader is ``afd-e2e run``, the follower ``afd-e2e join --follow``, started once the leader waits.

- killing the follower's EngineCore fails the leader within seconds, naming the follower's agent;
- stopping it (SIGSTOP) is a stall the follower's watchdog finds (requests in flight at its server, no token moving
  for ``budgets.stall_s``, 5 s here as in ``test_stall_cpu_vllm.py``), and the leader fails within seconds of it,
  naming the follower's agent;
- cancelling the leader ends the follower, and nothing is left on either side; the leader's correctness phase,
  cancelled, is recorded as cancelled everywhere (the cancel-per-phase test's correctness case);
- a leader killed outright (SIGKILL: no end published) ends its follower once its heartbeat stops, with the
  follower's own teardown and hygiene; a follower killed outright fails the leader once its heartbeat stops (after
  the profile's ``budgets.heartbeat_lost_s``, a third of the default 30 s: each of these waits seconds, not a minute);
- cancelling the follower (its job cancelled, its agent stopped) fails the leader within seconds, naming its agent;
- a follower that never starts ends the leader at its rendezvous budget, with a reason naming the role and pool,
  and a follower starting after that finds nothing to join.

Six vLLM launches, one per test that starts a follower (the last test's follower never starts): each test ends its
follower's server its own way (a killed or stopped engine, a cancel, a kill of either side), so none can share.
That all phases pass with the server on the follower, and the merged report, are checked on the passing build of
``test_two_agents_pool_cpu_vllm.py`` (the same leader and follower, under the plugin's hooks).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
import yaml

from afd_e2e.multi_agent.lifecycle import beat_every_s
from afd_e2e.profile import load_profile
from cancel_support import assert_cancelled_everywhere
from repo_paths import GSM8K_DIR, REPO
from two_agents_support import FOLLOWER_AGENT, LEADER_JOB, Build, finish

# the most vLLM servers this module starts (tests/launch_counter.py): one follower's server per test that starts one
LAUNCHES = 6

pytestmark = pytest.mark.engine

PORT_BASE = 19700  # this module's block: one case at a time on 19700
CASE, PROCESS = "cpu-tp1-remote", "server"
# A death or cancel on the follower to the leader's case ending: the follower's watch, its published state, the
# leader's read of it once a second (each a buildkite-agent call) and its records: a few seconds. "Within 5 s" is the
# loopback figure docs/agents.md gives; a loaded 2-core machine stretches every call, so the test allows 15 s, which
# still fails a leader that learns of it only from the follower's heartbeat (budgets.heartbeat_lost_s, 10 s, plus its
# reads) or from its requests' budget (request_s, 60 s).
DETECTION_LIMIT_S = 15.0
SHIPPED = REPO / "python" / "afd_e2e" / "profiles" / "tiny-cpu-two-agents.yaml"  # what ``profile_file`` builds on
# A silent side is taken for gone budgets.heartbeat_lost_s after the last new beat its reader saw, and each side beats
# and reads every sixth of it: the last beat before a kill was written up to one beat earlier and seen up to one read
# later, plus the reads themselves (each a buildkite-agent call) and this test's polling: 43.8 s was seen once with
# the default 30 s on 2 busy cores, 3.8 s past its two beats. 12 s more than the two beats keeps a loaded machine
# inside, and the bound stays under the default budget (30 s): a side read on the default instead of the profile's
# budget fails it.
LOST_S = load_profile(str(SHIPPED)).budgets.heartbeat_lost_s
LOST_FROM_S, LOST_BY_S = LOST_S - beat_every_s(LOST_S), LOST_S + 2 * beat_every_s(LOST_S) + 12.0
# The stall test's budgets.stall_s: half the profile's, as test_stall_cpu_vllm.py runs it (each stall costs CI its
# length); that module's loaded figure (6.6 s from the last token to the verdict at load average 10) sits inside it.
STALL_S = 5.0


def profile_file(tmp_path: Path, **budgets: float) -> Path:
    """tiny-cpu-two-agents as shipped; with ``long=True`` its GSM8K asks 1000 questions one at a time, so the case
    is still in its correctness phase when the test strikes (tens of seconds)."""
    data = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    long = budgets.pop("long", False)
    data["budgets"].update(budgets)
    if long:
        data["workloads"]["gsm8k"].update(questions=1000, concurrency=1, max_tokens=128)
    path = tmp_path / "tiny-cpu-two-agents.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.fixture
def cpu_build(tiny_model: Path, tmp_path: Path) -> Iterator[Callable[[Path], Build]]:
    """A build of ``profile`` on the tiny model; ended after the test whatever it asserted (``Build.end``)."""
    builds = []

    def make(profile: Path) -> Build:
        env = {"AFD_E2E_TINY_MODEL": str(tiny_model), "AFD_E2E_GSM8K_DIR": str(GSM8K_DIR)}
        builds.append(Build(tmp_path, profile, case=CASE, process=PROCESS, port_base=PORT_BASE, env=env))
        return builds[-1]

    yield make
    for build in builds:
        build.end()


def test_killing_the_followers_engine_core_fails_the_leader_within_seconds_naming_the_follower(cpu_build, tmp_path):
    build = cpu_build(profile_file(tmp_path, long=True))
    leader, follower = build.start(until_phase="correctness")
    core = build.follower_engine_core()

    core.kill()
    killed = time.monotonic()
    detected_s = build.seconds_until_case_ends(killed, 30)

    case = build.case_results()
    assert case["status"] == "failed", build.outputs()
    assert detected_s < DETECTION_LIMIT_S, (detected_s, case["failure"])
    assert f"{PROCESS} on agent {FOLLOWER_AGENT}" in case["failure"], case["failure"]
    assert "during correctness" in case["failure"], case["failure"]
    assert finish(leader, 120, build) == 1
    assert finish(follower, 60, build) == 1  # its own part failed: its engine died
    merged = build.case_results()
    assert [p["agent"] for p in merged["processes"]] == [FOLLOWER_AGENT]
    assert any(f["trigger"] == "death" for f in merged["forensics"]), merged["forensics"]  # taken on the follower
    build.nothing_left()


def test_a_stall_on_the_follower_fails_the_leader_within_seconds_of_the_followers_watchdog(cpu_build, tmp_path):
    build = cpu_build(profile_file(tmp_path, long=True, stall_s=STALL_S))
    stall_s = yaml.safe_load(build.profile.read_text(encoding="utf-8"))["budgets"]["stall_s"]
    leader, follower = build.start(until_phase="correctness")
    core = build.follower_engine_core()

    core.suspend()
    stopped = time.monotonic()
    detected_s = build.seconds_until_case_ends(stopped, 60)

    case = build.case_results()
    assert case["status"] == "failed", build.outputs()
    # stall_s of quiet on the follower's 1 s samples, then its published state read by the leader: 11.6 s on 2 cores
    # at load average 10 with stall_s = 10, 3.4 s inside stall_s + 5 s. Twice stall_s (+ the reads) keeps a loaded
    # machine inside and fails a follower's watchdog that waits out a second window, or a stall left to the leader's
    # request budget (request_s, 60 s).
    print(f"follower's engine stopped to the leader's case ending: {detected_s:.1f} s")
    assert detected_s < 2 * stall_s + 5, (detected_s, case["failure"])
    assert case["failure"].startswith(f"{PROCESS} on agent {FOLLOWER_AGENT} stalled during correctness"), case
    assert "no token for" in case["failure"] and "EngineCore" in case["failure"], case["failure"]  # its watchdog's
    assert finish(leader, 120, build) == 1
    assert finish(follower, 60, build) == 1
    merged = build.case_results()
    assert any(f["trigger"] == "stall" for f in merged["forensics"]), merged["forensics"]  # taken on the follower
    assert merged["telemetry"]["stalls"], merged["telemetry"]
    # the follower gave the leader time to end its requests: its vLLM then stopped on SIGTERM, no SIGKILL needed
    forced = [h for h in merged["hygiene"] if h["check"] == "forced_kill" and h["agent"] == FOLLOWER_AGENT]
    assert [h["status"] for h in forced] == ["passed"], forced
    build.nothing_left()


def test_cancelling_the_leader_ends_the_follower_and_leaves_nothing_on_either_side(cpu_build, tmp_path):
    build = cpu_build(profile_file(tmp_path, long=True))
    leader, follower = build.start(until_phase="correctness")

    leader.send_signal(signal.SIGTERM)
    cancelled = time.monotonic()
    assert finish(leader, 60, build) == 1
    assert finish(follower, 60, build) == 0, build.outputs()  # it ended because its leader did
    ended_s = time.monotonic() - cancelled

    results = json.loads(build.leader_results.read_text(encoding="utf-8"))
    assert results["status"] == "cancelled" and results["cases"][CASE]["status"] == "cancelled"
    # the leader runs the workloads: its correctness phase, cancelled on a real engine, is the cancel-per-phase
    # test's correctness case (tests/cancel_support.py)
    assert_cancelled_everywhere(build.leader_dir / "out", CASE, "correctness")
    assert build.meta_data(f"{CASE}/phase") == "ended:cancelled"
    assert build.meta_data("leader") == "ended:cancelled"
    assert ended_s < 30, ended_s
    build.nothing_left()
    ports = [c.laddr.port for c in psutil.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN]
    assert PORT_BASE not in ports


def test_a_leader_killed_outright_ends_its_follower_once_its_heartbeat_stops(cpu_build, tmp_path):
    """SIGKILL: the leader publishes no end, so its follower learns of it only from its silent heartbeat."""
    build = cpu_build(profile_file(tmp_path, long=True))
    leader, follower = build.start(until_phase="correctness")

    leader.kill()
    killed = time.monotonic()
    leader.wait()
    assert finish(follower, LOST_S + 60, build) == 1, build.outputs()  # failed: its case never ended
    ended_s = time.monotonic() - killed

    assert LOST_FROM_S <= ended_s < LOST_BY_S + 20, ended_s  # then its teardown and its records
    case = json.loads((build.follower_out / "results.json").read_text(encoding="utf-8"))["cases"][CASE]
    assert case["status"] == "failed" and f"leader job {LEADER_JOB}: the leader's heartbeat stopped" in case["failure"]
    assert {h["check"]: h["status"] for h in case["hygiene"]}["forced_kill"] == "passed", case["hygiene"]
    build.nothing_left()
    assert build.meta_data("leader") == "running"  # nobody published its end: the heartbeat is all there was


def test_a_follower_killed_outright_fails_the_leader_once_its_heartbeat_stops(cpu_build, tmp_path):
    """SIGKILL of the follower's afd-e2e: its server stays up (nothing watches it any more) and answers /health, so
    only the follower's silent heartbeat tells the leader; the follower's pre-exit ``cleanup`` ends the server."""
    build = cpu_build(profile_file(tmp_path, long=True))
    leader, follower = build.start(until_phase="correctness")

    follower.kill()
    killed = time.monotonic()
    follower.wait()
    detected_s = build.seconds_until_case_ends(killed, LOST_S + 30)

    case = build.case_results()
    assert case["status"] == "failed", build.outputs()
    assert LOST_FROM_S <= detected_s < LOST_BY_S, (detected_s, case["failure"])
    assert case["failure"].startswith(f"{PROCESS} on agent {FOLLOWER_AGENT} lost its follower during correctness"), case
    assert "its follower's heartbeat stopped" in case["failure"], case["failure"]
    assert finish(leader, 60, build) == 1  # without waiting for records a follower killed outright never uploads
    records = [h for h in build.case_results()["hygiene"] if h["check"] == "records"]
    assert [(h["status"], h["agent"]) for h in records] == [("failed", FOLLOWER_AGENT)], records
    assert "its follower was lost" in records[0]["detail"], records
    cleanup = subprocess.run(
        [sys.executable, "-m", "afd_e2e", "cleanup", "--out", str(build.follower_out), "--within", "8"],
        cwd=build.follower_dir, env=build.env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    said = cleanup.stdout + cleanup.stderr
    assert "processes of run" in said and "ended" in said, said  # the server left behind, ended by the cleanup
    build.nothing_left()


def test_cancelling_the_follower_fails_the_leader_within_seconds_naming_its_agent(cpu_build, tmp_path):
    build = cpu_build(profile_file(tmp_path, long=True))
    leader, follower = build.start(until_phase="correctness")

    follower.send_signal(signal.SIGTERM)
    cancelled = time.monotonic()
    detected_s = build.seconds_until_case_ends(cancelled, 30)

    case = build.case_results()
    assert case["status"] == "failed", build.outputs()
    assert detected_s < DETECTION_LIMIT_S, (detected_s, case["failure"])
    assert case["failure"].startswith(f"{PROCESS} on agent {FOLLOWER_AGENT} ended during correctness"), case
    assert "cancelled by SIGTERM" in case["failure"], case["failure"]
    assert finish(follower, 60, build) == 1
    assert finish(leader, 120, build) == 1
    build.nothing_left()


def test_a_follower_that_never_starts_ends_the_leader_at_its_rendezvous_budget(cpu_build, tmp_path):
    build = cpu_build(profile_file(tmp_path, rendezvous_s=5))
    started = time.monotonic()
    leader = build.leader()

    assert finish(leader, 120, build) == 1
    took_s = time.monotonic() - started

    case = build.case_results()
    assert case["status"] == "failed" and case["processes"] == []  # nothing was launched
    assert case["failure"].startswith(
        f"rendezvous: {PROCESS} (a follower job on an agent with queue=afd-e2e-cpu-follower) never joined within "
        "budgets.rendezvous_s = 5 s"
    ), case["failure"]
    assert took_s < 60, took_s
    late = build.follower()
    assert finish(late, 60, build) == 3  # the leader has ended: nothing to join
    assert "has already ended (failed): nothing to join" in (build.follower_dir / "output.log").read_text()
