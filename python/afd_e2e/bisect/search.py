"""The binary search over a first-parent commit list, as a pure state machine (no git, no processes, no clock).

The commits run from the good revision (index 0) to the bad one (the last index). The caller asks ``next_step`` what
to do given the words said so far (index -> good | bad | skipped) and feeds each probe's word back, as a
``git bisect`` user does. Endpoints come first: the good revision (it is the reference every other probe is judged
against), then the bad one; when they do not reproduce (bad judged good, good judged bad) the search says so and
stops, since a bisect between two equal ends would name an arbitrary commit. Between the last good and the first bad
commit the next probe is the untried commit nearest the middle (the lower one on a tie), so a skipped commit costs
one neighbour, not a restart, and the search ends on a range when only skipped commits remain between them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from afd_e2e.results.status import BisectWord


@dataclass(frozen=True)
class ProbeAt:
    index: int
    why: str


@dataclass(frozen=True)
class Found:
    index: int  # the first bad commit


@dataclass(frozen=True)
class Range:
    first: int  # the first bad commit is one of first..last (inclusive); last is the first commit known bad
    last: int


@dataclass(frozen=True)
class Stop:
    reason: str  # the endpoints do not reproduce, or one of them cannot be probed


Step = ProbeAt | Found | Range | Stop


def _ends(count: int, words: Mapping[int, BisectWord]) -> Step | None:
    good, bad = 0, count - 1
    if good not in words:
        return ProbeAt(good, "the good revision: the reference every probe is judged against")
    if words[good] is BisectWord.SKIPPED:
        return Stop("the good revision could not be probed (it did not install or start, or stayed undecided)")
    if words[good] is BisectWord.BAD:
        return Stop("the good revision is not good: the endpoints do not reproduce (pick an older --good)")
    if bad not in words:
        return ProbeAt(bad, "the bad revision: does the regression reproduce?")
    if words[bad] is BisectWord.SKIPPED:
        return Stop("the bad revision could not be probed (it did not install or start, or stayed undecided)")
    if words[bad] is BisectWord.GOOD:
        return Stop("the bad revision is judged good: the regression does not reproduce here")
    return None


def next_step(count: int, words: Mapping[int, BisectWord]) -> Step:
    """What to do next over ``count`` commits (at least two) given the words said so far."""
    assert count >= 2, "a bisect needs a good and a bad commit"
    ends = _ends(count, words)
    if ends is not None:
        return ends
    first_bad = min(i for i, w in words.items() if w is BisectWord.BAD)
    last_good = max(i for i, w in words.items() if w is BisectWord.GOOD and i < first_bad)
    untried = [i for i in range(last_good + 1, first_bad) if i not in words]
    if not untried:
        return Found(first_bad) if first_bad == last_good + 1 else Range(last_good + 1, first_bad)
    middle = (last_good + first_bad) / 2
    pick = min(untried, key=lambda i: (abs(i - middle), i))
    return ProbeAt(pick, f"between good {last_good} and bad {first_bad}")


def probe_bound(count: int) -> int:
    """The most probes a search without skips makes: both endpoints and ⌈log2(commits between them + 1)⌉."""
    return 2 + math.ceil(math.log2(count - 1)) if count > 2 else 2


def plan_lines(commits: Sequence[str]) -> list[str]:
    """The probe plan ``--dry-run`` prints: the first probes and how the search branches after them."""
    count = len(commits)
    lines = [f"probe 1: {commits[0]} (good revision, the reference)", f"probe 2: {commits[-1]} (bad revision)"]
    words = {0: BisectWord.GOOD, count - 1: BisectWord.BAD}
    step = next_step(count, words)
    if isinstance(step, ProbeAt):
        lines.append(f"probe 3: {commits[step.index]} (the middle of the {count - 2} commits between)")
        for word in (BisectWord.GOOD, BisectWord.BAD):
            after = next_step(count, {**words, step.index: word})
            if isinstance(after, ProbeAt):
                lines.append(f"  if {word}: probe 4 is {commits[after.index]}")
    lines.append(f"at most {probe_bound(count)} probes without skips, each with repetitions added while inconclusive")
    return lines
