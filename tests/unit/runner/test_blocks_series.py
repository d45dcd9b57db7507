"""Unit tier: a blocks series whose relaunch fails its hygiene (``runner.series_servers.run_blocks``): the series ends
``failed`` naming the block, the block is recorded with its failed check, and the side's case fails. ``run_block``
is replaced by a recorder returning the failed block's record (a teardown that needed SIGKILL), as the case's own
lifecycle writes it: no process is started."""

from __future__ import annotations

import threading
from dataclasses import replace
from types import SimpleNamespace

from afd_e2e.plan import build_plan
from afd_e2e.plan.model import ComparisonPlan
from afd_e2e.plan.series import plan_series
from afd_e2e.profile import load_profile
from afd_e2e.profile.bench_spec import bench_spec
from afd_e2e.results.model import CaseResults, CheckRecord
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.results.performance_records import CasePerformance, Repetition
from afd_e2e.results.status import Status
from afd_e2e.runner import series_servers

TINY = load_profile("tiny-cpu")
BLOCKS = replace(
    TINY,
    workloads={
        **TINY.workloads,
        "bench": replace(bench_spec(TINY), repetitions=2, max_repetitions=4, alternation="blocks"),
    },
)
SIGKILLED = "hygiene: forced_kill: SIGKILL needed for server: still running 10 s after SIGTERM"


def _plan():
    plan = build_plan(BLOCKS, model_path="/nonexistent")
    one = plan.cases[0]
    cases = (replace(one, id="twin"), replace(one, id="base"))  # twin planned first: it leads the blocks
    comparisons = (ComparisonPlan("base-vs-twin", "base", "twin", ("performance",)),)
    return replace(plan, cases=cases, comparisons=comparisons, series=plan_series(BLOCKS, cases, comparisons))


def _case(case_id: str) -> CaseResults:
    reps = [
        Repetition(i, Status.PASSED, None, "", "", 8, {"mean_tpot_ms": 100.0, "output_throughput": 10.0}, 5.0)
        for i in (1, 2)
    ]
    case = CaseResults(id=case_id, label="native", kind="native", status=Status.PASSED)
    case.set_section(PERFORMANCE, CasePerformance(Status.PASSED, repetitions=reps))
    return case


def test_a_relaunch_that_needed_sigkill_fails_the_series_and_its_sides_case(monkeypatch):
    plan = _plan()
    (planned,) = plan.series
    launched = []

    def run_block(ctx, case, block, work):
        launched.append((case.id, block))
        failed = CaseResults(id=case.id, label=case.label, kind=case.kind, status=Status.FAILED, failure=SIGKILLED)
        failed.hygiene = [CheckRecord("forced_kill", Status.FAILED, "SIGKILL needed for server")]
        return failed

    monkeypatch.setattr(series_servers, "run_block", run_block)
    cases = {c: _case(c) for c in ("twin", "base")}
    store = SimpleNamespace(results=SimpleNamespace(cases=cases), flush=lambda: None, lock=threading.Lock())
    flag = SimpleNamespace(is_set=lambda: False)
    ctx = SimpleNamespace(
        profile=BLOCKS, plan=plan, store=store, flag=flag, progress=lambda _line: None, clock=lambda: 0.0
    )

    series_servers.run_blocks(ctx, planned)

    assert launched == [("twin", "base-vs-twin-block-2")]  # the lead's relaunch failed: base is not relaunched
    record = cases["twin"].section(PERFORMANCE).sequential
    assert (record.stopped, record.reason) == ("failed", f"twin: block 2: {SIGKILLED}")
    assert [(b.side, b.block, b.status) for b in record.blocks] == [
        ("twin", 1, Status.PASSED),
        ("base", 1, Status.PASSED),
        ("twin", 2, Status.FAILED),
    ]
    assert record.blocks[2].hygiene[0].status is Status.FAILED and record.looks == []
    assert cases["twin"].status is Status.FAILED
    assert cases["twin"].failure == f"performance: sequential series: block 2: {SIGKILLED}"
    assert cases["base"].status is Status.PASSED
