"""Where a probed commit lies between the bisect's endpoints, and whether it carries the regression (pure).

A bisect asks of each commit "does it carry the regression the endpoints show?", not "is it equivalent to the good
revision within the profile's margin?": a commit at 2 ms TPOT when good is 1.7 ms and bad is 34.5 ms is good by any
engineer's reading, however noisy 2 ms is against 1.7 ms. So the scale is the endpoints' own difference:

- **position** ``p = (mean(commit) - mean(good)) / (mean(bad) - mean(good))``: 0 at the good revision, 1 at the bad
  one, whatever the metric's direction;
- **the decision is at the middle**: the contrast ``L = mean(commit) - (mean(good) + mean(bad)) / 2`` is a linear
  combination of three independent means, with variance ``var_c/n_c + var_g/(4 n_g) + var_b/(4 n_b)`` and
  Satterthwaite's degrees of freedom; the commit is **bad** when L's two-sided 90% interval (5% a side) lies wholly
  on the bad side of zero, **good** when it lies wholly on the good side, **undecided** when it straddles it. The
  interval shown for p is ``0.5 + (L ± t·SE) / (mean(bad) - mean(good))``, the same decision on the endpoints'
  scale (it lies above 0.5 exactly when the commit is called bad).
- Each look (a run of the commit added while undecided) spends an equal share of the 5% a side (Bonferroni over the
  planned looks, as the performance comparison does), so **a commit carrying at most half the regression is called
  bad with a probability of at most 5% over all its looks**, and one carrying half or more is called good at most
  as often; a commit at either end (p near 0 or 1, the usual case) is miscalled far less often, since the middle
  is half the endpoints' difference away. Per commit, not per search: a search probes ⌈log2 n⌉ + 2 commits.
- Each side's **share** of L's variance says what would narrow it: the endpoints' runs are shared by every
  commit, so where an endpoint's spread weighs as much as the commit's own, a run of that endpoint is added
  (``bisect/drive.py``) rather than only more runs of the commit, which could never narrow the endpoint's part.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from afd_e2e.results.status import BisectWord
from afd_e2e.workloads.stats import Summary, student_t_quantile

CONFIDENCE = 0.90  # L's two-sided interval: 5% a side on a single look, split over the looks
GOOD_END, BAD_END = "good", "bad"


@dataclass(frozen=True)
class Position:
    """A commit placed between the endpoints: its position and interval (0 good, 1 bad), its word (None:
    undecided), each side's share of the contrast's variance (commit, good, bad) and the sentence why."""

    position: float
    interval: tuple[float, float]
    word: BisectWord | None
    shares: tuple[float, float, float]
    reason: str

    def ends_to_add(self) -> tuple[str, ...]:
        """The endpoints whose spread weighs at least as much as the commit's own, and a third of the whole, in an
        undecided position: a run of each narrows what more runs of the commit alone never could."""
        if self.word is not None:
            return ()
        own, good, bad = self.shares
        return tuple(end for end, share in ((GOOD_END, good), (BAD_END, bad)) if share >= max(own, 1 / 3))


def locate(good: Sequence[float], bad: Sequence[float], commit: Sequence[float], *, looks: int) -> Position | None:
    """The commit's position between the endpoints' values; None when a side has fewer than two values or the
    endpoints' means are equal (no regression to place it on)."""
    if min(len(good), len(bad), len(commit)) < 2:
        return None
    g, b, c = Summary.of(good), Summary.of(bad), Summary.of(commit)
    span = b.mean - g.mean
    if span == 0.0 or not math.isfinite(span):
        return None
    terms = (c.std**2 / c.n, g.std**2 / (4 * g.n), b.std**2 / (4 * b.n))
    contrast = c.mean - (g.mean + b.mean) / 2.0
    variance = sum(terms)
    se = math.sqrt(variance)
    if se == 0.0:
        half = 0.0
    else:
        df = variance**2 / sum(term**2 / (n - 1) for term, n in zip(terms, (c.n, g.n, b.n), strict=True) if term)
        half = student_t_quantile(1.0 - (1.0 - CONFIDENCE) / 2.0 / looks, df) * se
    low, high = sorted((0.5 + (contrast - half) / span, 0.5 + (contrast + half) / span))
    word = BisectWord.BAD if low > 0.5 else BisectWord.GOOD if high < 0.5 else None
    shares = (terms[0] / variance, terms[1] / variance, terms[2] / variance) if variance else (0.0, 0.0, 0.0)
    place = f"position {(c.mean - g.mean) / span:.2f} (0 good, 1 bad; 90% interval [{low:.2f}, {high:.2f}])"
    if word is BisectWord.BAD:
        reason = f"{place}: carries the regression"
    elif word is BisectWord.GOOD:
        reason = f"{place}: does not carry the regression"
    else:
        reason = f"{place} straddles the middle"
    return Position((c.mean - g.mean) / span, (low, high), word, shares, reason)
