"""Unit tier: regression episodes (``afd_e2e.trend.episodes``): a planted step in a synthetic history opens exactly
one episode, which stays open while the nights stay moved and closes when they return; a failed night never forms a
baseline; a move inside the band or below the materiality opens nothing; the trend section names the open episode
with its last good and first bad builds and commits."""

from __future__ import annotations

from pathlib import Path

from afd_e2e.cli import main
from afd_e2e.trend.episodes import Materiality, Night, episodes
from afd_e2e.trend.record import BuildRef, metric
from fixtures.trend.make_history import make_history

TPOT = metric("mean_tpot_ms")
MATERIAL = Materiality(sigma=2.0, pct=5.0)
STEADY = [10.0, 10.1, 9.9, 10.05, 9.95, 10.0]


def _nights(values: list[float], failed: tuple[int, ...] = ()) -> list[Night]:
    return [
        Night(BuildRef(f"#{100 + i}", 100 + i, commit=f"{100 + i:040x}"), v, i not in failed)
        for i, v in enumerate(values)
    ]


def _episodes(nights: list[Night], threshold_pct: float = 5.0):
    return episodes("cpu-tp1", TPOT, nights, threshold_pct=threshold_pct, materiality=MATERIAL, window=14)


def test_a_planted_step_opens_exactly_one_episode_and_closes_it() -> None:
    found = _episodes(_nights([*STEADY, 13.0, 13.2, 12.9, 13.1, 10.0, 10.1]))
    assert len(found) == 1
    episode = found[0]
    assert (episode.last_good.number, episode.first_bad.number, episode.nights) == (105, 106, 4)
    assert episode.closed_by is not None and episode.closed_by.number == 110 and not episode.open
    assert 30.0 < episode.worst_pct < 33.0


def test_an_episode_still_moved_tonight_stays_open_as_one_alert() -> None:
    found = _episodes(_nights([*STEADY, 13.0, 13.2, 12.9, 13.1]))
    assert len(found) == 1 and found[0].open and found[0].nights == 4


def test_a_failed_night_is_never_part_of_a_baseline() -> None:
    # night 103 failed with a wild value: in a baseline it would widen the band past the step; it opens nothing
    values = [10.0, 10.1, 9.9, 30.0, 10.05, 9.95, 10.0, 12.0, 12.1]
    assert len(_episodes(_nights(values, failed=(3,)))) == 1
    found = _episodes(_nights([*STEADY, 13.0, 13.1], failed=(5,)))
    assert found[0].last_good.number == 104, "the failed night 105 is not the last good one"


def test_moves_inside_the_band_or_below_materiality_open_nothing() -> None:
    assert _episodes(_nights([*STEADY, 10.3, 10.2])) == []
    # beyond a zero-threshold band, but 3% is below the 5% materiality
    assert _episodes(_nights([*STEADY, 10.3, 10.3]), threshold_pct=0.0) == []
    # an improvement is no regression episode
    assert _episodes(_nights([*STEADY, 7.0, 7.1])) == []


def test_the_trend_section_names_the_open_episode_with_builds_and_commits(tmp_path: Path) -> None:
    history = make_history(tmp_path / "made")
    assert main(["trend", str(history.tonight), "--history", str(history.folder)]) == 0
    annotation = (history.tonight / "annotation.md").read_text()
    assert "**Open regression episodes**" in annotation
    line = next(line for line in annotation.splitlines() if line.startswith("- Mean TPOT of <code>cpu\\-tp2</code>"))
    first_bad, last_good = history.slow_from, history.slow_from - 1
    assert f'last good <a href="https://buildkite.com/acme/vllm-nightly/builds/{last_good}">' in line
    assert f'first bad <a href="https://buildkite.com/acme/vllm-nightly/builds/{first_bad}">' in line
    assert line.count("(commit <code>") == 2
    assert sum("open for 6 nights" in line for line in annotation.splitlines()) == 6, "one line an episode, not a night"


def test_the_last_good_night_is_inside_the_band_not_an_earlier_regressed_one() -> None:
    # window 3: nights 104-106 moved to 12; the rule sees the change on its second night (105) and walks back to
    # its first, so the bisect starts from 103, a night at the old level, never from a night that had already moved
    nights = _nights([10.0, 10.1, 9.9, 10.0, 12.0, 12.1, 12.0])
    found = episodes("cpu-tp1", TPOT, nights, threshold_pct=5.0, materiality=MATERIAL, window=3)
    assert len(found) == 1 and (found[0].first_bad.number, found[0].opened.number) == (104, 105)
    assert found[0].last_good.number == 103
