"""`afd-e2e trend` on a folder of earlier runs: the section, the plot, JUnit, the bounds and the bad inputs."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from afd_e2e.cli import main
from afd_e2e.report.annotation import MAX_BYTES
from afd_e2e.report.escape import markdown_text
from afd_e2e.report.trend_attach import attach
from fixtures.trend.make_history import History, make_history
from junit_xsd import assert_valid_junit


@pytest.fixture
def history(tmp_path: Path) -> History:
    return make_history(tmp_path / "made")


@pytest.fixture(autouse=True)
def no_trend_env(monkeypatch):
    for name in ("AFD_E2E_TREND", "BUILDKITE_BUILD_NUMBER", "BUILDKITE_BUILD_URL"):
        monkeypatch.delenv(name, raising=False)


def profile_with(tmp_path: Path, trend: str) -> Path:
    shipped = Path(__file__).resolve().parents[3] / "python" / "afd_e2e" / "profiles" / "tiny-cpu.yaml"
    path = tmp_path / "tiny-cpu.yaml"
    path.write_text(shipped.read_text() + f"trend:\n{trend}", encoding="utf-8")
    return path


def junit_cases(out: Path) -> dict[str, ET.Element]:
    root = assert_valid_junit(out / "trend" / "junit.xml")
    return {case.get("name"): case for case in root.iter("testcase")}


def test_a_folder_history_gives_the_section_plot_and_passing_junit_with_warn(history, capsys):
    assert main(["trend", str(history.tonight), "--history", str(history.folder)]) == 0
    assert "6 regressions" in capsys.readouterr().out
    annotation = (history.tonight / "annotation.md").read_text()
    assert "### Trend over the last 14 runs" in annotation
    assert '<a href="artifact://trend/tp1-vs-tp2.png">' in annotation
    assert (history.tonight / "trend" / "tp1-vs-tp2.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    cases = junit_cases(history.tonight)
    assert len(cases) == 18
    slow = cases["cpu-tp2 mean_ttft_ms"]
    assert slow.find("failure") is None
    assert "regression" in slow.find("system-out").text and "since #116" in slow.find("system-out").text
    attached = attach(history.tonight, "# report\n", "success", max_bytes=MAX_BYTES)
    assert attached.style == "warning" and attached.junit == (history.tonight / "trend" / "junit.xml",)
    assert attached.body.startswith("# report\n\n### Trend over the last 14 runs")


def test_on_regression_fail_fails_the_testcases_and_the_command(history, tmp_path):
    profile = profile_with(tmp_path, "  on_regression: fail\n")
    assert main(["trend", str(history.tonight), "--history", str(history.folder), "--profile", str(profile)]) == 1
    cases = junit_cases(history.tonight)
    failed = sorted(name for name, case in cases.items() if case.find("failure") is not None)
    assert failed == sorted(
        f"cpu-tp2 {key}"
        for key in (
            "request_throughput",
            "output_throughput",
            "mean_ttft_ms",
            "mean_tpot_ms",
            "mean_itl_ms",
            "mean_e2el_ms",
        )
    )
    summary = json.loads((history.tonight / "trend" / "trend.json").read_text())
    assert summary["style"] == "error"


def test_a_history_without_the_slowdown_flags_nothing(tmp_path):
    made = make_history(tmp_path / "flat", slow_from=10_000)
    assert main(["trend", str(made.tonight), "--history", str(made.folder)]) == 0
    summary = json.loads((made.tonight / "trend" / "trend.json").read_text())
    assert summary["regressions"] == 0 and summary["style"] == "success"
    assert {c["status"] for c in summary["calls"]} == {"steady"}


def test_the_annotation_stays_under_1_mib_with_100_runs_of_history(tmp_path):
    made = make_history(tmp_path / "long", runs=100, slow_from=190, messy={102 + i: "schema" for i in range(0, 60, 2)})
    assert main(["trend", str(made.tonight), "--history", str(made.folder), "--window", "100"]) == 0
    annotation = (made.tonight / "annotation.md").read_bytes()
    summary = json.loads((made.tonight / "trend" / "trend.json").read_text())
    assert len(summary["history"]) == 70 and len(summary["skipped"]) == 30
    assert len(annotation) < MAX_BYTES
    section = (made.tonight / "trend" / "annotation.md").read_text()
    assert "Trend over the last 70 runs" in section and "… and 10 more" in section
    assert "regression" in section  # the slowdown from #190 is still found among 100 runs
    assert "since" not in section or "#190" in section


def test_an_over_size_section_is_replaced_by_a_pointer(history):
    main(["trend", str(history.tonight), "--history", str(history.folder)])
    body = attach(history.tonight, "x" * (MAX_BYTES - 1000), "success", max_bytes=MAX_BYTES).body
    assert len(body.encode()) < MAX_BYTES
    assert "see trend/annotation.md" in body


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "no history to compare with (fix: pass --history DIR or --buildkite, or set AFD_E2E_TREND)"),
        (["--history", "/nonexistent"], "history folder /nonexistent does not exist"),
        (["--buildkite"], "BUILDKITE_API_TOKEN is not set (fix: give the job a Buildkite API access token"),
        (["--buildkite", "--token-env", "bkua_x-y"], "--token-env is not an environment variable name"),
        (["--history", "/tmp", "--window", "2"], "--window 2 is too small"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(history, monkeypatch, capsys, args, message):
    monkeypatch.delenv("BUILDKITE_API_TOKEN", raising=False)
    assert main(["trend", str(history.tonight), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_the_report_warns_and_renders_without_a_trend_when_the_history_is_unusable(history, monkeypatch, capsys):
    monkeypatch.setenv("AFD_E2E_TREND", "/nonexistent")
    (history.tonight / "trend").mkdir()
    (history.tonight / "trend" / "annotation.md").write_text("stale")
    assert main(["report", str(history.tonight)]) == 0
    assert (
        "trend (AFD_E2E_TREND=/nonexistent) skipped: history folder /nonexistent does not exist"
        in capsys.readouterr().err
    )
    assert not (history.tonight / "trend").exists()
    assert "Trend over" not in (history.tonight / "annotation.md").read_text()


def test_the_profile_trend_section_is_validated(tmp_path):
    from afd_e2e.errors import UsageError
    from afd_e2e.profile import load_profile

    assert load_profile(str(profile_with(tmp_path, "  window: 30\n  threshold_pct: 8\n"))).trend.window == 30
    with pytest.raises(UsageError, match=r"trend.on_regression: unknown value 'stop'.*use warn or fail"):
        load_profile(str(profile_with(tmp_path, "  on_regression: stop\n")))
    with pytest.raises(UsageError, match=r"trend.windw"):
        load_profile(str(profile_with(tmp_path, "  windw: 3\n")))


def test_the_report_runs_no_trend_for_a_run_that_did_not_finish(history, monkeypatch, capsys):
    results = json.loads((history.tonight / "results.json").read_text())
    results["status"] = "cancelled"
    (history.tonight / "results.json").write_text(json.dumps(results))
    monkeypatch.setenv("AFD_E2E_TREND", str(history.folder))
    assert main(["report", str(history.tonight)]) == 0
    assert "trend skipped: the run did not finish (status cancelled)" in capsys.readouterr().err
    assert not (history.tonight / "trend").exists()


def test_tonight_own_results_in_the_history_are_skipped_not_a_second_night(tmp_path):
    """A local run (no build record) whose results were copied into the history folder: the copy has tonight's
    run_id, so it is skipped, and tonight's slowdown is one night, not a two-night change point (one night alone is
    no change to the rule: counted twice, it would have been a regression)."""
    made = make_history(tmp_path / "made", slow_from=121)
    tonight = json.loads((made.tonight / "results.json").read_text())
    del tonight["build"]
    tonight["run_id"] = "local-run-1"
    (made.tonight / "results.json").write_text(json.dumps(tonight))
    copy = made.folder / "run-121"  # the folder name's digits make it the newest earlier run
    copy.mkdir()
    (copy / "results.json").write_text(json.dumps(tonight))

    assert main(["trend", str(made.tonight), "--history", str(made.folder)]) == 0
    summary = json.loads((made.tonight / "trend" / "trend.json").read_text())
    assert "run-121" not in [build["label"] for build in summary["history"]]
    skip = next(s for s in summary["skipped"] if s["build"]["label"] == "run-121")
    assert skip["kind"] == "tonight's run" and "local-run-1" in skip["reason"]
    tpot = next(c for c in summary["calls"] if (c["case_id"], c["metric"]["key"]) == ("cpu-tp2", "mean_tpot_ms"))
    assert tpot["status"] == "steady", tpot


def _crashed(tonight: Path) -> None:
    results = json.loads((tonight / "results.json").read_text())
    results["status"] = "failed"
    results["verdict"] = {"status": "failed", "reasons": ["case cpu-tp1: the engine died"]}
    results["cases"] = {}
    (tonight / "results.json").write_text(json.dumps(results))


@pytest.mark.parametrize(
    ("setup", "why"),
    [
        ("empty history", "no earlier run is comparable with tonight"),
        ("crashed tonight", "tonight's run recorded no value (status failed)"),
    ],
)
def test_a_trend_that_judged_nothing_says_so_and_why(tmp_path, capsys, setup: str, why: str):
    made = make_history(tmp_path / "made", slow_from=10_000)
    history = made.folder
    if setup == "empty history":
        history = tmp_path / "empty"
        history.mkdir()
    else:
        _crashed(made.tonight)
    assert main(["trend", str(made.tonight), "--history", str(history)]) == 0
    out = capsys.readouterr().out
    assert f"nothing judged: {why}" in out and "0 regressions" not in out
    section = (made.tonight / "trend" / "annotation.md").read_text()
    assert f"**nothing judged**: {markdown_text(why)}." in section and "no regression" not in section
    assert json.loads((made.tonight / "trend" / "trend.json").read_text())["style"] == "info"


def test_one_regression_is_singular_and_the_change_says_what_it_is_against(tmp_path, capsys):
    made = make_history(tmp_path / "made", slow_from=10_000)
    # one metric slower on the newest earlier night and tonight: one change (the rule needs two nights)
    for folder in (made.folder / f"build-{made.builds[-1]}", made.tonight):
        results = json.loads((folder / "results.json").read_text())
        for rep in results["cases"]["cpu-tp2"]["performance"]["repetitions"]:
            rep["metrics"]["mean_tpot_ms"] *= 1.3
        (folder / "results.json").write_text(json.dumps(results))
    assert main(["trend", str(made.tonight), "--history", str(made.folder)]) == 0
    out = capsys.readouterr().out
    assert "; 1 regression\n" in out and "1 regressions" not in out
    assert "against the median before the change" in out
    section = (made.tonight / "trend" / "annotation.md").read_text()
    assert "**1 regression**" in section
    assert "<th>window median ± spread</th><th>tonight (mean of its repetitions)</th>" in section
    assert "<th>change against the median before the change</th>" in section
