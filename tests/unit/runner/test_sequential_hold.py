"""Unit tier: which ranged comparisons the runner runs as alternating series (``runner.sequential.plan_series``) and
the order cases are held and run in: a shared baseline stays up (its ``while_up`` open) while both its candidates
run their series, and a baseline that failed lets the rest run without it. ``run_case`` and the series are
replaced by recorders: no process is started."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from afd_e2e.plan import build_plan
from afd_e2e.plan.model import ComparisonPlan
from afd_e2e.profile import load_profile
from afd_e2e.results.model import CaseResults
from afd_e2e.results.status import Status
from afd_e2e.runner import sequential

TINY = load_profile("tiny-cpu")
RANGED = replace(TINY, bench=replace(TINY.bench, repetitions=3, max_repetitions=8))


def _plan(profile=RANGED):
    return build_plan(profile, model_path="/nonexistent")


def test_a_ranged_comparison_of_two_local_cases_without_shared_devices_runs_as_a_series():
    assert sequential.plan_series(RANGED, _plan()) == ({"cpu-tp2": "cpu-tp1"}, {})
    assert sequential.plan_series(TINY, _plan(TINY)) == ({}, {})  # a fixed count: nothing to add


def test_a_pair_sharing_a_device_keeps_min_repetitions_and_says_why():
    plan = _plan()
    on_gpu0 = tuple(
        replace(case, processes=tuple(replace(p, devices=(0,)) for p in case.processes)) for case in plan.cases
    )
    series, refused = sequential.plan_series(RANGED, replace(plan, cases=on_gpu0))
    assert series == {}
    record = refused["cpu-tp2"]
    assert (record.stopped, record.looks) == ("not run", [])
    assert record.reason == "cpu-tp2 runs while cpu-tp1 is held and shares devices [0] with it: 3 repetitions a side"


def _cases(names, pairs, devices=None):
    """Cases ``names`` (of one engine configuration; ``devices``: name -> its processes' devices) and the ranged
    comparisons ``pairs`` (baseline, candidate)."""
    one = _plan().cases[0]
    cases = tuple(
        replace(one, id=name, processes=tuple(replace(p, devices=(devices or {}).get(name, ())) for p in one.processes))
        for name in names
    )
    comparisons = tuple(ComparisonPlan(f"{b}-vs-{c}", b, c, ("performance",)) for b, c in pairs)
    return replace(_plan(), cases=cases, comparisons=comparisons)


def _three_cases():
    """base, twin, slowed; both later ones compared with base."""
    return _cases(("base", "twin", "slowed"), (("base", "twin"), ("base", "slowed")))


def test_a_case_run_while_a_baseline_is_held_may_not_share_its_devices():
    """x needs base's GPU 0 and runs between base and its candidate: base cannot be held, the pair keeps min."""
    plan = _cases(("base", "x", "cand"), (("base", "cand"),), devices={"base": (0,), "x": (0, 1), "cand": (2,)})
    series, refused = sequential.plan_series(RANGED, plan)
    assert series == {} and refused["cand"].reason.startswith("x runs while base is held and shares devices [0]")


def test_holds_that_would_cross_are_refused_and_nested_ones_run():
    crossing = _cases(("a", "b", "c", "d"), (("a", "c"), ("b", "d")))
    series, refused = sequential.plan_series(RANGED, crossing)
    assert series == {"c": "a"}
    assert refused["d"].reason.startswith("holding a until c would cross holding b until d")
    nested = _cases(("a", "b", "c", "d"), (("a", "d"), ("b", "c")))
    assert sequential.plan_series(RANGED, nested) == ({"d": "a", "c": "b"}, {})


def _recorded_run(monkeypatch, plan, failing=()):
    events: list[str] = []

    def run_case(ctx, case, while_up=None):
        events.append(f"up {case.id}")
        results = CaseResults(id=case.id, label=case.label, kind=case.kind, status=Status.PASSED)
        if case.id in failing:
            results.status = Status.FAILED
        elif while_up is not None:
            while_up(SimpleNamespace(case=case), results)
        events.append(f"down {case.id}")
        ctx.store.results.cases[case.id] = results
        return results

    def run_series(ctx, held, case, results, servers):
        events.append(f"series {held.case.id} vs {case.id}")

    monkeypatch.setattr(sequential, "run_case", run_case)
    monkeypatch.setattr(sequential, "run_series", run_series)
    store = SimpleNamespace(results=SimpleNamespace(cases={}), flush=lambda: None)
    ctx = SimpleNamespace(profile=RANGED, plan=plan, flag=SimpleNamespace(is_set=lambda: False), store=store)
    sequential.run_cases(ctx, plan.cases)
    return events


def test_a_shared_baseline_stays_up_while_both_its_candidates_run_their_series(monkeypatch):
    assert _recorded_run(monkeypatch, _three_cases()) == [
        "up base",
        "up twin",
        "series base vs twin",
        "down twin",
        "up slowed",
        "series base vs slowed",
        "down slowed",
        "down base",
    ]


def test_a_baseline_that_failed_is_not_held_and_the_rest_still_runs(monkeypatch):
    assert _recorded_run(monkeypatch, _three_cases(), failing={"base"}) == [
        "up base",
        "down base",
        "up twin",
        "down twin",
        "up slowed",
        "down slowed",
    ]


def test_nested_holds_run_inside_out(monkeypatch):
    plan = _cases(("a", "b", "c", "d"), (("a", "d"), ("b", "c")))
    assert _recorded_run(monkeypatch, plan) == [
        "up a",
        "up b",
        "up c",
        "series b vs c",
        "down c",
        "down b",
        "up d",
        "series a vs d",
        "down d",
        "down a",
    ]
