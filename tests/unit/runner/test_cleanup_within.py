"""Unit tier: ``afd-e2e cleanup --within S`` counts S from its own process's start, as the pre-exit hook that gave
it counts: the seconds a loaded machine spends starting Python and importing come out of the cleanup's waits, so
it still ends before the hook's bound (which once killed it before its port check on a busy CI machine)."""

from __future__ import annotations

import pytest

from afd_e2e.cli import main
from afd_e2e.commands.cleanup import left_of


def test_the_budget_left_is_what_the_start_did_not_spend():
    assert left_of(8.0, now=lambda: 1003.25, started_at=1000.0) == pytest.approx(4.75)


def test_a_start_slower_than_the_budget_leaves_no_waits_not_a_negative_budget():
    assert left_of(1.269, now=lambda: 1002.0, started_at=1000.0) == 0.0


def test_a_clock_behind_the_recorded_start_spends_nothing():
    assert left_of(8.0, now=lambda: 999.5, started_at=1000.0) == 8.0


def test_the_command_hands_the_cleanup_what_is_left_of_within(tmp_path, monkeypatch):
    given = []
    monkeypatch.setattr("afd_e2e.runner.cleanup.clean_up", lambda out, within_s: given.append(within_s) or [])
    monkeypatch.setattr("afd_e2e.commands.cleanup.left_of", lambda within_s: within_s - 2.5)

    assert main(["cleanup", "--out", str(tmp_path), "--within", "8"]) == 0
    assert main(["cleanup", "--out", str(tmp_path)]) == 0

    assert given == [5.5, None]  # no --within: the cleanup's own defaults, nothing subtracted


def test_this_process_has_spent_some_of_a_budget_since_it_started():
    assert 0.0 <= left_of(3600.0) < 3600.0
