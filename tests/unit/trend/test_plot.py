"""The trend plot draws what the rule judged: each case's band, its median and the 3-night limits are
``analysis.edges`` of the call's own baseline (read back off the drawn artists by their ids), and a regressed panel
is shaded from the change's first build and named in its title; a steady panel is neither."""

from __future__ import annotations

import pytest

from afd_e2e.trend.analysis import REGRESSION, STEADY, edges
from afd_e2e.trend.compute import TrendReport
from afd_e2e.trend.plot import REGRESSED_COLOR, plot_trend
from afd_e2e.trend.trend_run import TrendOptions, run_trend
from fixtures.trend.make_history import make_history


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> TrendReport:
    made = make_history(tmp_path_factory.mktemp("made"))  # the slow case's latencies +30% from build 116
    found, _ = run_trend(made.tonight, TrendOptions(source=str(made.folder)), environ={})
    return found


def _drawn(figure, row) -> tuple:
    ax = next(a for a in figure.axes if a.get_visible() and a.get_title().startswith(f"{row.metric.name} ("))
    by_id = {}
    for artist in ax.get_children():
        by_id.setdefault(artist.get_gid(), []).append(artist)
    return ax, by_id


def test_each_case_s_band_and_limits_are_the_analysis_edges_of_its_call_s_baseline(report: TrendReport) -> None:
    comparison = report.comparisons[0]
    figure = plot_trend(report, comparison)
    rows = [r for r in report.calls if r.case_id in (comparison.baseline, comparison.candidate) and r.baseline]
    assert {r.status for r in rows} == {STEADY, REGRESSION}
    for row in rows:
        _, by_id = _drawn(figure, row)
        (band,) = by_id[f"band {row.case_id}"]
        assert (band.get_y(), band.get_y() + band.get_height()) == pytest.approx(edges(row.baseline, 2))
        (median,) = by_id[f"median {row.case_id}"]
        assert list(median.get_ydata()) == pytest.approx([row.baseline.centre] * 2)
        limits = sorted(line.get_ydata()[0] for line in by_id[f"limit3 {row.case_id}"])
        assert limits == pytest.approx(list(edges(row.baseline, 3)))


def test_a_regressed_panel_is_shaded_from_the_change_and_named_and_a_steady_one_is_not(report: TrendReport) -> None:
    comparison = report.comparisons[0]
    figure = plot_trend(report, comparison)
    runs = [*report.history, report.tonight]
    for row in report.calls:
        if row.case_id != comparison.candidate or row.baseline is None:
            continue
        ax, by_id = _drawn(figure, row)
        shaded = by_id.get(f"regressed {row.case_id}", [])
        if row.status == REGRESSION:
            start = next(x for x, run in enumerate(runs) if run.build == row.started)
            (span,) = shaded
            assert span.get_x() == pytest.approx(start - 0.5)
            assert f"regression since {row.started.label}" in ax.get_title()
            assert ax.title.get_color() == REGRESSED_COLOR
        else:
            assert shaded == [] and "regression" not in ax.get_title()
