"""Unit tier: how the plan alternates each ranged comparison (``plan.series.plan_series``) and the order the runner
holds, runs and relaunches cases in: a shared baseline stays up (its ``while_up`` open) while both its candidates
run their series, a baseline that failed lets the rest run without it, and a blocks series runs once the later of
its cases is over. ``run_case`` and the series are replaced by recorders: no process is started."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from afd_e2e.plan import build_plan
from afd_e2e.plan.model import ComparisonPlan
from afd_e2e.plan.series import plan_series
from afd_e2e.profile import load_profile
from afd_e2e.profile.bench_spec import bench_spec
from afd_e2e.results.model import CaseResults
from afd_e2e.results.status import Status
from afd_e2e.runner import series_servers

TINY = load_profile("tiny-cpu")
RANGED = replace(
    TINY, workloads={**TINY.workloads, "bench": replace(bench_spec(TINY), repetitions=3, max_repetitions=8)}
)


def _plan(profile=RANGED):
    return build_plan(profile, model_path="/nonexistent")


def _chosen(profile, plan):
    """(held: candidate -> baseline, blocks: candidate -> baseline, refused: candidate -> why) of the plan's series."""
    found = plan_series(profile, plan.cases, plan.comparisons)
    pick = {
        kind: {s.candidate: s.baseline for s in found if s.alternation == kind} for kind in ("repetitions", "blocks")
    }
    return pick["repetitions"], pick["blocks"], {s.candidate: s.reason for s in found if s.alternation == "not run"}


def test_a_ranged_comparison_of_two_local_cases_without_shared_devices_runs_as_a_series():
    assert _chosen(RANGED, _plan()) == ({"cpu-tp2": "cpu-tp1"}, {}, {})
    assert _chosen(TINY, _plan(TINY)) == ({}, {}, {})  # a fixed count: nothing to add
    assert _plan().series[0].describe().startswith("cpu-tp1 vs cpu-tp2, 3 to 8 repetitions a side, alternating rep")


def _on_gpu0(plan):
    cases = tuple(
        replace(case, processes=tuple(replace(p, devices=(0,)) for p in case.processes)) for case in plan.cases
    )
    return replace(plan, cases=cases)


def test_a_pair_sharing_a_device_alternates_blocks_and_the_plan_says_what_it_may_add():
    """auto: a pair on one GPU cannot be up at once, so each side is relaunched per block: min 3, max 8, blocks of
    3: two added blocks a side (the last one of 2), four added launches, first look after the second block."""
    plan = _on_gpu0(_plan())
    assert _chosen(RANGED, plan) == ({}, {"cpu-tp2": "cpu-tp1"}, {})
    (series,) = plan_series(RANGED, plan.cases, plan.comparisons)
    assert (series.step, series.launches, series.looks, series.lead) == (3, 4, 2, "cpu-tp1")
    budgets = RANGED.budgets
    per_block = (
        budgets.startup_s
        + (bench_spec(RANGED).warmups + 3) * budgets.seconds("bench_repetition_s")
        + budgets.teardown_s
    )
    assert series.worst_s == 4 * per_block
    assert (
        "alternating blocks (blocks of 3 on a fresh launch each, up to 4 added launches; auto: the pair shares "
        "devices [0], so both cannot be up at once); 2 planned looks" in series.describe()
    )


def test_a_pair_sharing_a_device_asked_to_alternate_repetitions_keeps_min_and_says_why():
    profile = replace(
        RANGED, workloads={**RANGED.workloads, "bench": replace(bench_spec(RANGED), alternation="repetitions")}
    )
    held, blocks, refused = _chosen(profile, _on_gpu0(_plan()))
    assert (held, blocks) == ({}, {})
    assert refused["cpu-tp2"] == (
        "the pair shares devices [0], so both cannot be up at once, and alternation: repetitions was asked"
    )


def test_blocks_asked_where_both_could_be_up_and_blocks_too_big_for_the_range_under_auto():
    asked = replace(
        RANGED, workloads={**RANGED.workloads, "bench": replace(bench_spec(RANGED), alternation="blocks", block_size=2)}
    )
    (series,) = plan_series(asked, _plan().cases, _plan().comparisons)
    assert (series.alternation, series.step, series.launches, series.looks) == ("blocks", 2, 6, 3)
    big = replace(
        RANGED, workloads={**RANGED.workloads, "bench": replace(bench_spec(RANGED), block_size=6)}
    )  # 3 + 6 > 8: no room for a second block
    plan = _on_gpu0(_plan())
    (series,) = plan_series(big, plan.cases, plan.comparisons)
    assert series.alternation == "not run" and series.reason.endswith(
        "blocks of 6 need room for two a side, but repetitions run 3 to 8"
    )


def _cases(names, pairs, devices=None):
    """Cases ``names`` (of one engine configuration; ``devices``: name -> its processes' devices) and the ranged
    comparisons ``pairs`` (baseline, candidate)."""
    one = _plan().cases[0]
    cases = tuple(
        replace(one, id=name, processes=tuple(replace(p, devices=(devices or {}).get(name, ())) for p in one.processes))
        for name in names
    )
    comparisons = tuple(ComparisonPlan(f"{b}-vs-{c}", b, c, ("performance",)) for b, c in pairs)
    return replace(_plan(), cases=cases, comparisons=comparisons, series=plan_series(RANGED, cases, comparisons))


def _three_cases():
    """base, twin, slowed; both later ones compared with base."""
    return _cases(("base", "twin", "slowed"), (("base", "twin"), ("base", "slowed")))


def test_a_case_run_while_a_baseline_is_held_may_not_share_its_devices():
    """x needs base's GPU 0 and runs between base and its candidate: base cannot be held, the pair keeps min."""
    plan = _cases(("base", "x", "cand"), (("base", "cand"),), devices={"base": (0,), "x": (0, 1), "cand": (2,)})
    held, blocks, refused = _chosen(RANGED, plan)
    assert (held, refused) == ({}, {})  # auto: relaunched in blocks after cand instead
    assert blocks == {"cand": "base"}
    series = plan_series(RANGED, plan.cases, plan.comparisons)[0]
    assert series.reason == "auto: x runs while base is held and shares devices [0] with it"


def test_holds_that_would_cross_are_refused_and_nested_ones_run():
    crossing = _cases(("a", "b", "c", "d"), (("a", "c"), ("b", "d")))
    held, blocks, _refused = _chosen(RANGED, crossing)
    assert (held, blocks) == ({"c": "a"}, {"d": "b"})  # the crossing pair is relaunched in blocks instead
    assert plan_series(RANGED, crossing.cases, crossing.comparisons)[1].reason.startswith(
        "auto: holding a until c would cross holding b until d"
    )
    nested = _cases(("a", "b", "c", "d"), (("a", "d"), ("b", "c")))
    assert _chosen(RANGED, nested) == ({"d": "a", "c": "b"}, {}, {})


def test_a_blocks_pair_relaunched_while_a_held_baseline_shares_its_device_is_refused():
    """(a, b) shares GPU 0, so it alternates blocks, relaunched after b; but b runs while y is held for z, and a
    shares GPU 1 with y: relaunching a then would put two servers on GPU 1."""
    plan = _cases(
        ("a", "y", "b", "z"),
        (("y", "z"), ("a", "b")),
        devices={"a": (0, 1), "y": (1,), "b": (0,), "z": (2,)},
    )
    held, blocks, refused = _chosen(RANGED, plan)
    assert (held, blocks) == ({"z": "y"}, {})
    assert refused["b"] == (
        "auto: the pair shares devices [0], so both cannot be up at once; but y is held up then and shares "
        "devices [1] with its relaunches"
    )


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

    def run_held_series(ctx, held, case, results, servers):
        events.append(f"series {held.case.id} vs {case.id}")

    def run_blocks(ctx, planned):
        events.append(f"blocks {planned.baseline} vs {planned.candidate}")

    monkeypatch.setattr(series_servers, "run_case", run_case)
    monkeypatch.setattr(series_servers, "run_held_series", run_held_series)
    monkeypatch.setattr(series_servers, "run_blocks", run_blocks)
    store = SimpleNamespace(results=SimpleNamespace(cases={}), flush=lambda: None, lock=None)
    ctx = SimpleNamespace(profile=RANGED, plan=plan, flag=SimpleNamespace(is_set=lambda: False), store=store)
    series_servers.run_cases(ctx, plan.cases)
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


def test_a_blocks_series_runs_once_the_later_of_its_cases_is_over(monkeypatch):
    """base-vs-slowed shares GPU 0 (blocks, after slowed); base-vs-twin is held (repetitions)."""
    plan = _cases(
        ("base", "twin", "slowed"),
        (("base", "twin"), ("base", "slowed")),
        devices={"base": (0,), "twin": (1,), "slowed": (0,)},
    )
    assert [s.alternation for s in plan.series] == ["repetitions", "blocks"]
    assert _recorded_run(monkeypatch, plan) == [
        "up base",
        "up twin",
        "series base vs twin",
        "down twin",
        "down base",
        "up slowed",
        "down slowed",
        "blocks base vs slowed",
    ]
