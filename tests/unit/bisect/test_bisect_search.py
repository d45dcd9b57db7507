"""Unit tier: the bisect's pure search (``afd_e2e.bisect.search``): endpoints first, the middle next, skipped
commits stepped around, a range when skips hide the answer, a stop when the endpoints do not reproduce."""

from __future__ import annotations

import math

import pytest

from afd_e2e.bisect.search import Found, ProbeAt, Range, Stop, next_step, plan_lines, probe_bound
from afd_e2e.results.status import BisectWord

GOOD, BAD, SKIP = BisectWord.GOOD, BisectWord.BAD, BisectWord.SKIPPED


def _search(count: int, word_of) -> tuple[object, list[int]]:
    """Drive the search to its end, saying ``word_of(index)`` for every probe; the end and the probes in order."""
    words: dict[int, BisectWord] = {}
    probed = []
    while isinstance(step := next_step(count, words), ProbeAt):
        assert step.index not in words, "a commit is never probed twice"
        probed.append(step.index)
        words[step.index] = word_of(step.index)
    return step, probed


@pytest.mark.parametrize("count", range(2, 18))
def test_every_planted_first_bad_commit_is_found_within_the_bound(count: int) -> None:
    for first_bad in range(1, count):
        end, probed = _search(count, lambda i, k=first_bad: BAD if i >= k else GOOD)
        assert end == Found(first_bad)
        assert probed[:2] == [0, count - 1], "the endpoints first: good (the reference), then bad"
        assert len(probed) <= probe_bound(count) == 2 + (math.ceil(math.log2(count - 1)) if count > 2 else 0)


def test_a_skipped_commit_costs_a_neighbour_not_the_answer() -> None:
    # 10 commits, first bad 5, commit 6 does not install: the search steps from 6 to its neighbour
    end, probed = _search(10, lambda i: SKIP if i == 6 else (BAD if i >= 5 else GOOD))
    assert end == Found(5)
    assert probed == [0, 9, 4, 6, 7, 5]


def test_skipped_commits_next_to_the_first_bad_one_end_on_a_range() -> None:
    end, probed = _search(10, lambda i: SKIP if i in (3, 4) else (BAD if i >= 4 else GOOD))
    assert end == Range(3, 5), "the first bad commit is 3, 4 or 5: the skipped ones hide which"
    assert 3 in probed and 4 in probed


@pytest.mark.parametrize(
    ("words", "said"),
    [
        ({0: GOOD, 9: GOOD}, "the bad revision is judged good: the regression does not reproduce"),
        ({0: BAD}, "the good revision is not good: the endpoints do not reproduce"),
        ({0: SKIP}, "the good revision could not be probed"),
        ({0: GOOD, 9: SKIP}, "the bad revision could not be probed"),
    ],
)
def test_endpoints_that_do_not_reproduce_stop_the_search(words: dict, said: str) -> None:
    step = next_step(10, words)
    assert isinstance(step, Stop) and step.reason.startswith(said)


def test_two_commits_need_only_the_endpoints() -> None:
    assert next_step(2, {0: GOOD, 1: BAD}) == Found(1)


def test_the_dry_run_plan_names_the_first_probes_and_both_branches() -> None:
    lines = plan_lines([f"c{i}" for i in range(10)])
    assert lines[:3] == [
        "probe 1: c0 (good revision, the reference)",
        "probe 2: c9 (bad revision)",
        "probe 3: c4 (the middle of the 8 commits between)",
    ]
    assert lines[3:5] == ["  if good: probe 4 is c6", "  if bad: probe 4 is c2"]
    assert lines[-1].startswith("at most 6 probes")
