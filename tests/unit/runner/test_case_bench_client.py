"""The case's warm bench client through a whole case (``runner/case.py``, ``CaseServers.bench_client``): started
with the case's servers, shared by every phase of the case, closed in the teardown before the hygiene checks.

Two throwaway phases that bench (``benches=True``), each one ``vllm bench serve`` of the vLLM CLI stand-in
(``unit/vllm_cli_stand_in.py``, which records each import: each start of a client) in ``ctx.bench_client``, on an
API stand-in on a port the OS chose (no concurrent test holds it); a case without such a phase gets no client.
"""

from __future__ import annotations

import dataclasses
import io
import socket
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from stand_ins import api_stand_in, stand_in_case, stand_in_plan

from afd_e2e.phases import registry
from afd_e2e.phases.registry import Budget, Phase
from afd_e2e.profile import load_profile
from afd_e2e.results.status import Status
from afd_e2e.runner.run import execute_run
from afd_e2e.system.markers import find_marked
from afd_e2e.system.progress import Progress
from afd_e2e.workloads import bench
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome
from unit.vllm_cli_stand_in import record_lines, stand_in_vllm

PROFILE = load_profile("tiny-cpu")


@dataclass
class Seen:
    """What the phases and the progress printer saw of the client, in order."""

    clients: list[bench.WarmClient | None] = field(default_factory=list)
    idle_at_phase: list[bool] = field(default_factory=list)  # started, and no command given yet
    imports_at_hygiene: list[int] = field(default_factory=list)
    closed_at_hygiene: list[bool] = field(default_factory=list)  # closed, its process ended
    processes: list = field(default_factory=list)  # the client's process as each phase found it


class WatchHygiene(Progress):
    """The runner's (quiet) progress printer that looks at the client as the hygiene checks begin."""

    def __init__(self, seen: Seen, record: Path) -> None:
        super().__init__(stream=io.StringIO())
        self.seen, self.record = seen, record

    def enter(self, case_id, phase, logs=()):
        if phase == "hygiene" and case_id == "benches":
            self.seen.imports_at_hygiene.append(len(record_lines(self.record, "import")))
            client = self.seen.clients[0]
            ended = all(p.poll() is not None for p in self.seen.processes)
            self.seen.closed_at_hygiene.append(client is not None and client.closed and ended)
        super().enter(case_id, phase, logs)


def bench_phase(name: str, seen: Seen, executable: str, out: Path, *, benches: bool = True) -> Phase:
    """A phase that runs one stand-in ``vllm bench serve`` in the case's client (or looks, without benching)."""

    def run(ctx: PhaseContext) -> PhaseOutcome:
        client = ctx.bench_client
        seen.clients.append(client)
        if not benches:
            return PhaseOutcome(Status.PASSED)
        assert client is not None
        seen.idle_at_phase.append(client.process is not None and client.idle)
        seen.processes.append(client.process)
        folder = out / "bench" / ctx.case.id
        argv = [executable, "bench", "serve", "--result-dir", str(folder), "--result-filename", f"{name}.json"]
        rep, _ = bench.run_repetition(
            argv,
            result_path=folder / f"{name}.json",
            log_path=folder / f"{name}.log",
            num_prompts=16,
            required=["mean_tpot_ms"],
            timeout_s=120.0,
            label=name,
            progress=ctx.progress,
            cancelled=ctx.cancelled,
            heartbeat_s=bench.PROGRESS_EVERY_S,
            env=bench.client_env(ctx.client_env(bench.PROCESS_NAME)),
            client=client,
        )
        return PhaseOutcome(rep.status, rep.failure)

    return Phase(
        name=name, doc="a stand-in bench", budget=Budget(f"{name}_s", 120.0), run=run, sections=(), benches=benches
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def phases(tmp_path):
    """The stand-in ``vllm`` (the profile's engine executable), what the phases see, and the phases registered."""
    executable, env, record = stand_in_vllm(tmp_path / "vllm")
    seen = Seen()
    out = tmp_path / "out"
    entries = [
        bench_phase("first-bench", seen, executable, out),
        bench_phase("second-bench", seen, executable, out),
        bench_phase("looks", seen, executable, out, benches=False),
    ]
    with registry.registered(entries[0]), registry.registered(entries[1]), registry.registered(entries[2]):
        yield executable, env, record, seen, out


def test_a_cases_phases_share_one_client_started_with_its_servers_and_closed_before_hygiene(phases):
    executable, env, record, seen, out = phases
    profile = dataclasses.replace(PROFILE, engine=dataclasses.replace(PROFILE.engine, executable=executable))
    port, other = free_port(), free_port()
    plan = stand_in_plan(
        stand_in_case("benches", api_stand_in(port), port=port, phases=("looks", "first-bench", "second-bench")),
        stand_in_case("quiet", api_stand_in(other), port=other, phases=("looks",)),
    )

    results = execute_run(profile, plan, out, progress=WatchHygiene(seen, record), env=env)

    benches = results.cases["benches"]
    assert benches.status is Status.PASSED, benches.failure
    client = seen.clients[0]
    assert client is not None and seen.clients[:3] == [client] * 3, "every phase of the case gets the one client"
    assert seen.idle_at_phase == [True, False], "started before the first phase (by the runner), then reused"
    assert seen.processes[0] is seen.processes[1], "one client process: the second phase found it warm"
    (imported,) = record_lines(record, "import")  # one start of the client in the whole case
    assert int(imported[1]) == seen.processes[0].pid
    assert len(record_lines(record, "run")) == 2, "each phase's command ran, in a child of the client"
    assert seen.imports_at_hygiene == [1] and seen.closed_at_hygiene == [True], "closed before the hygiene checks"
    assert {c.check: c.status for c in benches.hygiene}["processes"] is Status.PASSED
    assert (out / "bench" / "benches" / "client.log").exists(), "its log where a user finds it"
    assert seen.clients[3] is None, "a case with no phase that benches starts no client"
    assert results.cases["quiet"].status is Status.PASSED
    assert find_marked(results.run_id) == []
