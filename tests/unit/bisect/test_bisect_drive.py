"""Unit tier: the whole bisect (``afd_e2e.bisect.drive``) over stand-in installs and runs (``bisect_support``):
it finds a planted first bad commit on TPOT and on parity, skips a commit that does not install, adds runs while a
verdict is inconclusive up to the budget, stops when the endpoints do not reproduce, reuses the sample cache across
metrics and after a cancel (``--resume``), and writes a schema-valid bisect.json and a replayable log."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from bisect_support import BASE_TPOT, CASE, StandIns, slowed_from

from afd_e2e.bisect.drive import BisectSettings, log_text, run_bisect
from afd_e2e.bisect.verdicts import metric_spec
from afd_e2e.errors import UsageError
from afd_e2e.profile import load_profile
from afd_e2e.report.bisect_report import render_bisect_section, write_bisect_report
from afd_e2e.results.bisect_records import SCHEMA_FILE, CommitRef, bisect_schema, bisect_schema_text, load_bisect
from afd_e2e.results.status import BisectWord, Status, Verdict
from afd_e2e.runner.cancellation import CancelFlag

PROFILE = load_profile("tiny-cpu")
SHAS = [f"{i:x}" * 40 for i in range(10)]
COMMITS = [CommitRef(sha, f"commit {i}") for i, sha in enumerate(SHAS)]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def _settings(tmp_path: Path, metric: str, *, out: str = "out", resume: bool = False) -> BisectSettings:
    spec = metric_spec(PROFILE, CASE, metric)
    return BisectSettings(
        PROFILE, CASE, spec, tmp_path / "repo", "good", "bad", tmp_path / out, tmp_path / "cache", resume=resume
    )


def _run(settings: BisectSettings, stand_ins: StandIns, flag: CancelFlag | None = None):
    said: list[str] = []
    record = run_bisect(
        settings,
        list(COMMITS),
        install=lambda sha: stand_ins.install(sha, settings.cache),
        launch=stand_ins.launch,
        flag=flag or CancelFlag(),
        environ={"PYTHONPATH": "/agent"},
        say=said.append,
        clock=Clock(),
    )
    return record, said


def test_tpot_finds_the_first_slow_commit_and_skips_the_one_that_does_not_install(tmp_path: Path) -> None:
    stand_ins = StandIns(SHAS, tpot=slowed_from(5), uninstallable=(6,))
    record, _ = _run(_settings(tmp_path, "mean_tpot_ms"), stand_ins)
    assert record.status is Status.PASSED and record.first_bad == SHAS[5]
    assert record.conclusion == f"first bad commit: {SHAS[5]} commit 5"
    assert [p.index for p in record.probes] == [0, 9, 4, 6, 7, 5]
    by_index = {p.index: p for p in record.probes}
    assert by_index[6].word is BisectWord.SKIPPED and "pip install failed" in by_index[6].reason
    assert by_index[9].word is BisectWord.BAD and by_index[9].verdict is Verdict.WORSE
    assert by_index[4].word is BisectWord.GOOD and by_index[4].position == pytest.approx(0.0, abs=1e-9)
    assert by_index[7].word is BisectWord.BAD and by_index[7].position == pytest.approx(1.0)
    assert by_index[7].delta_pct == pytest.approx(50.0) and by_index[7].verdict is None
    low, high = by_index[7].position_ci90 or [0.0, 0.0]
    assert 0.5 < low < 1.0 < high and "carries the regression" in by_index[7].reason
    assert stand_ins.launches == [0, 9, 4, 7, 5] and record.launches == 5
    assert all(
        env["PYTHONPATH"] == f"{tmp_path}/cache/packages/{SHAS[i]}:/agent"
        for i, env in zip(stand_ins.launches, stand_ins.envs, strict=True)
    )
    data = json.loads((settings_out := tmp_path / "out" / "bisect.json").read_text())
    jsonschema.validate(data, bisect_schema())
    assert load_bisect(settings_out.parent).first_bad == SHAS[5]


def test_the_log_replays_with_git_bisect_words(tmp_path: Path) -> None:
    record, _ = _run(_settings(tmp_path, "mean_tpot_ms"), StandIns(SHAS, tpot=slowed_from(5), uninstallable=(6,)))
    log = (tmp_path / "out" / "bisect.log").read_text()
    assert log == log_text(record)
    commands = [line for line in log.splitlines() if not line.startswith("#")]
    assert commands == [
        "git bisect start --first-parent",
        f"git bisect good {SHAS[0]}",
        f"git bisect bad {SHAS[9]}",
        f"git bisect good {SHAS[4]}",
        f"git bisect skip {SHAS[6]}",
        f"git bisect bad {SHAS[7]}",
        f"git bisect bad {SHAS[5]}",
    ]
    assert log.splitlines()[-1] == f"# first bad commit: [{SHAS[5]}] commit 5"


def test_parity_reuses_the_tpot_searchs_runs_of_the_same_commits(tmp_path: Path) -> None:
    stand_ins = StandIns(SHAS, tpot=slowed_from(5), broken=lambda i: i >= 3, uninstallable=(6,))
    _run(_settings(tmp_path, "mean_tpot_ms", out="tpot"), stand_ins)
    stand_ins.launches.clear()
    record, _ = _run(_settings(tmp_path, "parity", out="parity"), stand_ins)
    assert record.first_bad == SHAS[3]
    assert stand_ins.launches == [2, 3], "0, 9 and 4 were run by the TPOT search"
    assert record.launches == 2
    reused = {p.index for p in record.probes if all(run.cached for run in p.runs)}
    assert reused == {0, 9, 4}
    bad = next(p for p in record.probes if p.index == 3)
    assert bad.word is BisectWord.BAD and bad.reason.startswith("parity: 3/3 prompts differ")


def test_an_undecided_commit_gets_runs_up_to_the_budget_then_is_skipped(tmp_path: Path) -> None:
    # commit 6 sits at the middle of the regression (12.5 against 10 and 15) with a spread of its own far beyond the
    # endpoints': more runs of it are what could decide it, and none does
    noisy = {6: [8.0, 17.0, 9.0, 16.0]}

    def tpot(index: int, run: int) -> list[float]:
        return noisy.get(index) or slowed_from(5)(index, run)

    stand_ins = StandIns(SHAS, tpot=tpot)
    record, said = _run(_settings(tmp_path, "mean_tpot_ms"), stand_ins)
    undecided = next(p for p in record.probes if p.index == 6)
    assert undecided.word is BisectWord.SKIPPED and undecided.position == pytest.approx(0.5, abs=0.05)
    assert (
        undecided.reason.startswith("undecided after 3 runs: position 0.5")
        and "straddles the middle" in undecided.reason
    )
    assert stand_ins.launches.count(6) == 3 and len(undecided.runs) == 3
    assert stand_ins.launches.count(0) == 1 and stand_ins.launches.count(9) == 1, "the endpoints' spread is small"
    assert any(line.startswith(f"{SHAS[6][:12]}: run 2 (undecided: position") for line in said)
    assert record.first_bad == SHAS[5], "the skipped commit is stepped around"


def test_a_commit_near_good_is_good_however_far_from_the_profiles_margin(tmp_path: Path) -> None:
    """Issue 45's case: a 19x regression, commits 20-50% off the good revision's noisy TPOT and nowhere near the bad
    one's: placed by the regression, not by the ±5% equivalence margin, so nothing is skipped."""
    good, bad = [2.18, 1.20], [34.87, 34.05]
    near_good = [[2.56, 2.22], [1.81, 2.53], [1.70, 2.35], [2.47, 2.08]]

    def tpot(index: int, run: int) -> list[float]:
        return good if index == 0 else bad if index >= 7 else near_good[index % 4]

    stand_ins = StandIns(SHAS, tpot=tpot)
    record, _ = _run(_settings(tmp_path, "mean_tpot_ms"), stand_ins)
    assert record.first_bad == SHAS[7]
    assert all(p.word is not BisectWord.SKIPPED for p in record.probes)
    assert len(stand_ins.launches) == len(record.probes) <= 2 + 4, "one run a probe, within ⌈log2 9⌉ + 2"


def test_an_endpoint_whose_spread_keeps_a_commit_undecided_gets_runs_added_and_recorded(tmp_path: Path) -> None:
    """Commit 4 is steady a little below the middle of the regression (14.3 between 10 and 20); the good
    revision's first run is what is noisy, so more runs of commit 4 alone could never narrow the good end's share:
    the good revision runs again (steady), recorded on its probe with the reason, and commit 4 is good."""

    def tpot(index: int, run: int) -> list[float]:
        if index == 0:
            return [9.0, 11.0, 9.5, 10.5] if run == 1 else list(BASE_TPOT)
        return [14.3, 14.31, 14.29, 14.3] if index == 4 else slowed_from(5, factor=2.0)(index, run)

    stand_ins = StandIns(SHAS, tpot=tpot)
    record, said = _run(_settings(tmp_path, "mean_tpot_ms"), stand_ins)
    assert record.first_bad == SHAS[5]
    good, commit = record.probes[0], next(p for p in record.probes if p.index == 4)
    assert [run.run for run in good.runs] == [1, 2] and good.runs[1].added.startswith(f"for {SHAS[4][:12]}: the good")
    assert "straddles the middle" in good.runs[1].added and len(good.values) == 8
    assert stand_ins.launches[:5] == [0, 9, 4, 0, 4], "the good revision runs again before commit 4's second run"
    assert commit.word is BisectWord.GOOD and len(commit.runs) == 2 and commit.position == pytest.approx(0.43, abs=0.01)
    assert any(line.startswith(f"{SHAS[0][:12]}: run 2 (for {SHAS[4][:12]}: the good revision's") for line in said)
    assert record.launches == len(stand_ins.launches)
    jsonschema.validate(json.loads((tmp_path / "out" / "bisect.json").read_text()), bisect_schema())


def test_endpoints_equal_within_their_noise_end_undecided_with_the_reason(tmp_path: Path) -> None:
    same = [[10.0, 10.6, 9.5, 10.2], [9.7, 10.4, 10.1, 9.6], [10.3, 9.6, 9.9, 10.5]]
    stand_ins = StandIns(SHAS, tpot=lambda index, run: same[(index + run) % 3])
    record, _ = _run(_settings(tmp_path, "mean_tpot_ms"), stand_ins)
    assert record.status is Status.FAILED and record.first_bad is None
    assert record.conclusion.startswith("the bad revision is judged good") or "stayed undecided" in record.conclusion


def test_a_bad_revision_that_is_not_slower_stops_the_search_with_exit_reason(tmp_path: Path) -> None:
    stand_ins = StandIns(SHAS, tpot=lambda _i, _r: list(BASE_TPOT))
    record, _ = _run(_settings(tmp_path, "mean_tpot_ms"), stand_ins)
    assert record.status is Status.FAILED and record.first_bad is None and record.range is None
    assert record.conclusion.startswith("the bad revision is judged good: the regression does not reproduce here (")
    assert "mean_tpot_ms parity" in record.conclusion, "the bad revision's own sentence says why"
    assert stand_ins.launches == [0, 9]


def test_skips_next_to_the_first_bad_commit_end_on_a_range(tmp_path: Path) -> None:
    record, _ = _run(_settings(tmp_path, "mean_tpot_ms"), StandIns(SHAS, tpot=slowed_from(5), uninstallable=(3, 4)))
    assert record.status is Status.FAILED and record.first_bad is None
    assert record.range is not None and record.range.commits == SHAS[3:6]
    assert "one of 3" in record.conclusion
    section = render_bisect_section(record)
    assert "The first bad commit is one of:" in section and f"`{SHAS[3]}`" in section


def test_a_cancel_keeps_the_probes_done_and_resume_continues_from_the_cache(tmp_path: Path) -> None:
    flag = CancelFlag()
    stand_ins = StandIns(SHAS, tpot=slowed_from(5), cancel_at=(6, lambda: flag.cancel("cancelled by SIGTERM")))
    record, _ = _run(_settings(tmp_path, "mean_tpot_ms"), stand_ins, flag)
    assert record.status is Status.CANCELLED and [p.index for p in record.probes] == [0, 9, 4]
    assert record.conclusion == "cancelled by SIGTERM: 3 probes kept; --resume continues"
    assert not list((tmp_path / "cache" / "runs" / "tiny-cpu" / CASE / SHAS[6]).glob("run-*")), "unfinished run dropped"
    with pytest.raises(UsageError, match="already holds a bisect"):
        _run(_settings(tmp_path, "mean_tpot_ms"), StandIns(SHAS, tpot=slowed_from(5)))
    again = StandIns(SHAS, tpot=slowed_from(5))
    resumed, _ = _run(_settings(tmp_path, "mean_tpot_ms", resume=True), again)
    assert resumed.first_bad == SHAS[5]
    assert again.launches == [6, 5] and resumed.launches == 4 + 2, "0, 9, 4 from the cache"
    with pytest.raises(UsageError, match="holds a bisect of tiny-cpu/cpu-tp1/mean_tpot_ms"):
        _run(_settings(tmp_path, "parity", resume=True), again)


def test_the_report_draws_every_probe_and_names_the_first_bad_commit(tmp_path: Path) -> None:
    record, _ = _run(_settings(tmp_path, "mean_tpot_ms"), StandIns(SHAS, tpot=slowed_from(5), uninstallable=(6,)))
    section = write_bisect_report(record, tmp_path / "out")
    assert (tmp_path / "out" / "bisect.png").read_bytes()[:4] == b"\x89PNG" and record.plot == "bisect.png"
    text = section.read_text()
    assert "first bad commit found" in text and f"first bad commit\\: {SHAS[5]} commit 5" in text
    assert text.count("\n| ") == 1 + 6, "a header and one row per probe"
    assert "git bisect replay bisect.log" in text


def test_the_shipped_bisect_schema_is_the_generated_one() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == bisect_schema_text()
    jsonschema.Draft202012Validator.check_schema(bisect_schema())
