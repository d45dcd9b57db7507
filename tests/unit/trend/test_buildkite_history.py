"""Unit tier: BuildkiteHistory against the local Buildkite API: which job's results, per-build problems as skips,
bounds. Its budget is read on a FakeClock and each request has the hang guard for its timeout: a loaded machine
fetching from loopback is slow, never out of time."""

from __future__ import annotations

import json
from urllib.parse import unquote

from afd_e2e.buildkite.rest import BuildkiteRest
from afd_e2e.trend.buildkite_history import BuildkiteHistory
from fixtures.trend.buildkite_server import ORG, PIPELINE, STEP_KEY, local_buildkite
from fixtures.trend.make_history import REAL_RUNS
from unit.timing import GUARD_S, FakeClock

TOKEN = "bk-token"
TINY = (REAL_RUNS[0] / "results.json").read_bytes()
OTHER_PROFILE = json.dumps({**json.loads(TINY), "profile": "tiny-gpu-1a1f"}).encode()


def history(server, **options) -> BuildkiteHistory:
    """The history of ``server``'s builds, on a clock that moves only when a test moves it."""
    defaults = {
        "organization": ORG,
        "pipeline": PIPELINE,
        "branch": "main",
        "profile": "tiny-cpu",
        "clock": FakeClock(),
    }
    rest = BuildkiteRest(TOKEN, base_url=server.api_url, timeout_s=GUARD_S)
    return BuildkiteHistory(rest, **{**defaults, **options})


def test_builds_are_asked_newest_first_on_the_branch_without_this_build():
    with local_buildkite(TOKEN) as server:
        for number in range(1, 8):
            server.add(number, "passed", TINY)
        server.add(8, "passed", TINY, branch="feature")
        server.add(9, "running", TINY)
        fetched = history(server, this_build=7).fetch(2)
        listed = server.api_requests("/builds?")
    assert [f.build.number for f in fetched] == [6, 5, 4, 3]
    assert all(f.results is not None for f in fetched)
    assert "branch=main&state[]=passed&state[]=failed&state[]=canceled&per_page=5" in unquote(listed[0].path)


def test_without_a_step_key_the_results_of_this_profile_are_taken():
    with local_buildkite(TOKEN) as server:
        server.add(1, "passed", OTHER_PROFILE)
        server.add(2, "passed", TINY)
        fetched = {f.build.number: f for f in history(server).fetch(3)}
    assert fetched[2].results.profile == "tiny-cpu"
    assert fetched[1].skip == "no results.json of profile tiny-cpu (found tiny-gpu-1a1f)"


def test_with_a_step_key_only_that_steps_job_counts():
    with local_buildkite(TOKEN) as server:
        server.add(1, "passed", TINY, step_key="another-step")
        server.add(2, "passed", TINY)
        fetched = {f.build.number: f for f in history(server, step_key=STEP_KEY).fetch(3)}
    assert fetched[2].results is not None
    assert fetched[1].skip == f"no results.json from a job of step {STEP_KEY}"


def test_a_broken_build_is_a_skip_and_the_rest_still_come():
    with local_buildkite(TOKEN) as server:
        server.add(1, "passed", TINY)
        server.add(2, "failed", b"not json")
        server.add(3, "passed", None)
        fetched = {f.build.number: f for f in history(server).fetch(3)}
    assert fetched[1].results is not None
    assert fetched[2].skip == "results.json is not JSON"
    assert fetched[3].skip == "no results.json artifact"


def test_the_budget_bounds_all_builds_together():
    """The budget is read on the clock given, which moves 0.25 s at each reading: the deadline is set at 0.25 s
    (1.25 s then), and each build reads it once before its download: at 0.5, 0.75, 1.0 and 1.25 s, then past it."""
    clock = FakeClock(start=0.0)

    def ticking() -> float:
        clock.advance(0.25)
        return clock()

    with local_buildkite(TOKEN) as server:
        for number in range(1, 21):
            server.add(number, "passed", TINY)
        fetched = history(server, workers=1, budget_s=1.0, clock=ticking).fetch(10)
    assert len(fetched) == 20
    assert [f.results is not None for f in fetched] == [True] * 4 + [False] * 16
    skipped = fetched[4:]
    assert all(f.skip_kind == "not fetched" and "1 s budget ran out" in f.skip for f in skipped)


def test_pages_of_builds_are_followed_until_the_window_is_filled():
    with local_buildkite(TOKEN) as server:
        for number in range(1, 251):
            server.add(number, "passed", TINY)
        builds = history(server).list_builds(120)
        listed = server.api_requests("/builds?")
    assert [b["number"] for b in builds] == list(range(250, 130, -1))
    assert len(listed) == 2 and "page=2" in listed[1].path
