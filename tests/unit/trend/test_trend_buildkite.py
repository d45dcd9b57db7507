"""The trend's proof: a local Buildkite REST API serves 20 nightly builds made from real tiny-cpu runs (two real
runs of `afd-e2e run --profile tiny-cpu`, plus runs derived from them by tests/fixtures/trend/make_history.py with
a 1.3x slowdown of cpu-tp2 injected from build #116 and a messy past) and drives `afd-e2e trend --buildkite`.

Unit tier (moved from tests/engine): no vLLM is started: the runs are real, the history around them is derived at
test time. The trend's budget for all builds is read on a FakeClock and each request has the hang guard for its
timeout: what is judged is what the trend makes of the builds, not whether a loaded machine fetches them in time.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from pathlib import Path

import pytest

from afd_e2e.buildkite.rest import BuildkiteRest
from afd_e2e.cli import main
from afd_e2e.trend import trend_run
from afd_e2e.trend.buildkite_history import BuildkiteHistory
from afd_e2e.trend.trend_run import TrendOptions
from fixtures.trend.buildkite_server import ORG, PIPELINE, STEP_KEY, local_buildkite, serve_history
from fixtures.trend.make_history import History, make_history
from repo_paths import REPO
from unit.timing import GUARD_S, FakeClock

TOKEN = "bkua_trend_secret_value"
LATENCY_AND_THROUGHPUT = (
    "request_throughput",
    "output_throughput",
    "mean_ttft_ms",
    "mean_tpot_ms",
    "mean_itl_ms",
    "mean_e2el_ms",
)


@pytest.fixture(autouse=True)
def budgets_off_the_wall_clock(monkeypatch) -> None:
    """The command builds its history with the product's bounds (120 s for all builds, 10 s a request): here the
    first is read on a clock that does not move and the second is the hang guard."""
    monkeypatch.setattr(trend_run, "BuildkiteHistory", functools.partial(BuildkiteHistory, clock=FakeClock()))
    monkeypatch.setattr(trend_run, "BuildkiteRest", functools.partial(BuildkiteRest, timeout_s=GUARD_S))


@pytest.fixture
def history(tmp_path: Path) -> History:
    return make_history(tmp_path / "made")


@pytest.fixture
def buildkite_env(monkeypatch, tmp_path: Path, history: History) -> None:
    for name in [n for n in os.environ if n.startswith(("BUILDKITE", "AFD_E2E_TREND"))]:
        monkeypatch.delenv(name)
    variables = {
        "BUILDKITE": "true",
        "BUILDKITE_ORGANIZATION_SLUG": ORG,
        "BUILDKITE_PIPELINE_SLUG": PIPELINE,
        "BUILDKITE_BRANCH": "main",
        "BUILDKITE_BUILD_NUMBER": str(history.tonight_build),
        "BUILDKITE_STEP_KEY": STEP_KEY,
        "BUILDKITE_API_TOKEN": TOKEN,
        "AFD_E2E_TREND_CACHE": str(tmp_path / "cache"),
    }
    for name, value in variables.items():
        monkeypatch.setenv(name, value)


def run_trend(server, tonight: Path, *args: str) -> int:
    return main(["trend", str(tonight), "--buildkite", "--api-url", server.api_url, *args])


def test_the_injected_slowdown_is_found_at_its_build_and_nothing_else_is_flagged(
    history, buildkite_env, capsys, tmp_path
):
    with local_buildkite(TOKEN) as server:
        serve_history(server, history.folder, history.builds, history.messy)
        code = run_trend(server, history.tonight)
    out = capsys.readouterr().out
    assert code == 0  # the shipped tiny-cpu profile warns on a regression
    summary = json.loads((history.tonight / "trend" / "trend.json").read_text())
    calls = {(c["case_id"], c["metric"]["key"]): c for c in summary["calls"]}
    flagged = {key for key, c in calls.items() if c["status"] == "regression"}
    assert flagged == {(history.slow_case, key) for key in LATENCY_AND_THROUGHPUT}
    for key in LATENCY_AND_THROUGHPUT:
        slow = calls[(history.slow_case, key)]
        assert slow["started"]["number"] == history.slow_from
        assert slow["started"]["url"].endswith(f"/builds/{history.slow_from}")
        assert slow["moved_nights"] == history.tonight_build - history.slow_from + 1
        assert abs(abs(slow["change_pct"]) - (30 if key.startswith("mean") else 23)) < 5
    steady = {key: c["status"] for key, c in calls.items() if key not in flagged}
    assert set(steady.values()) == {"steady"}, steady
    assert len(steady) == 12  # cpu-tp1: 9 metrics; cpu-tp2: GSM8K, ready time, teardown
    assert f"regression: {history.slow_case} mean_ttft_ms" in out and f"since #{history.slow_from}" in out


def test_each_messy_build_is_skipped_with_its_reason(history, buildkite_env, capsys):
    with local_buildkite(TOKEN) as server:
        serve_history(server, history.folder, history.builds, history.messy)
        run_trend(server, history.tonight, "--window", "20")
    summary = json.loads((history.tonight / "trend" / "trend.json").read_text())
    skipped = {s["build"]["number"]: (s["kind"], s["reason"]) for s in summary["skipped"]}
    by_kind = {kind: number for number, kind in history.messy.items()}
    assert skipped[by_kind["no-results"]] == ("no results", "no results.json artifact (only expired)")
    assert skipped[by_kind["schema"]][0] == "schema"
    assert "afd-e2e/results/v0" in skipped[by_kind["schema"]][1]
    assert skipped[by_kind["revision"]][0] == "other profile revision"
    assert skipped[by_kind["hardware"]] == (
        "other hardware",
        "hardware 1x NVIDIA H100 80GB HBM3, driver 550 (tonight cpu)",
    )
    assert skipped[by_kind["cancelled"]] == ("cancelled", "the build was canceled")
    assert set(skipped) == set(history.messy)
    assert len(summary["history"]) == len(history.builds) - len(history.messy)
    section = (history.tonight / "trend" / "annotation.md").read_text()
    assert "5 earlier builds skipped: " in section
    for kind in ("no results", "schema", "other profile revision", "other hardware", "cancelled"):
        assert f"1 {kind}" in section


def test_the_token_goes_to_the_api_only_and_results_are_cached_by_build(history, buildkite_env, tmp_path):
    with local_buildkite(TOKEN) as server:
        serve_history(server, history.folder, history.builds, history.messy)
        run_trend(server, history.tonight)
        first = list(server.requests)
        server.requests.clear()
        run_trend(server, history.tonight)
        second = list(server.requests)
    assert {r.authorization for r in first if r.host == "api"} == {f"Bearer {TOKEN}"}
    storage = [r for r in first if r.host == "storage"]
    assert storage and {r.authorization for r in storage} == {""}
    assert not [r for r in first if f"/builds/{history.tonight_build}/" in r.path]  # tonight's own build not asked
    # second night: every finished build's results come from the cache; only the list of builds is asked again
    assert [r for r in second if r.host == "storage"] == []
    assert {r.path.split("?")[0].rsplit("/", 1)[-1] for r in second} <= {"builds", "artifacts"}
    assert len([r for r in second if r.path.endswith("/artifacts?per_page=100")]) == 1  # the expired one


def test_the_report_runs_the_configured_trend_and_the_annotation_warns(history, buildkite_env, monkeypatch, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = REPO / "tests" / "stubs" / "record-call"
    (bin_dir / "buildkite-agent").symlink_to(stub)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("STUB_CALLS", str(tmp_path / "calls.log"))
    monkeypatch.setenv("AFD_E2E_TREND", "buildkite")
    out = tmp_path / "tonight"
    shutil.copytree(history.tonight, out)
    with local_buildkite(TOKEN) as server:
        serve_history(server, history.folder, history.builds, history.messy)
        local = TrendOptions(source="buildkite", api_url=server.api_url)
        monkeypatch.setattr(
            "afd_e2e.trend.auto.options_from_env", lambda environ: local if environ.get("AFD_E2E_TREND") else None
        )
        assert main(["report", str(out), "--publish"]) == 0
    annotation = (out / "annotation.md").read_text()
    assert "### Trend over the last 14 runs" in annotation
    assert f'<a href="https://buildkite.com/{ORG}/{PIPELINE}/builds/{history.slow_from}">' in annotation
    calls = (tmp_path / "calls.log").read_text()
    assert "annotate --style warning" in calls
    assert "artifact upload trend/*" in calls
