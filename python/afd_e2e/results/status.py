"""The one status vocabulary of results.json, for runs, cases, phases and every check (hygiene, preflight, cleanup),
and the direction word a performance metric gets. Reports read these enums; nothing translates status words."""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    RUNNING = "running"  # not finished when the results were last written
    PASSED = "passed"
    FAILED = "failed"  # measured and found wanting
    WARNED = "warned"  # a check that passed with a caveat
    SKIPPED = "skipped"  # not applicable or not run, with the reason beside it
    CANCELLED = "cancelled"  # stopped by SIGTERM/SIGINT (a cancelled job)
    CRASHED = "crashed"  # the harness or engine broke: not a measured failure
    INTERRUPTED = "interrupted"  # the runner vanished (SIGKILL, lost agent); found and closed by `afd-e2e cleanup`

    def __str__(self) -> str:
        return self.value

    @property
    def is_failure(self) -> bool:
        return self in (Status.FAILED, Status.CRASHED)

    @property
    def unfinished(self) -> bool:
        """The run stopped before this reached an outcome of its own."""
        return self in (Status.RUNNING, Status.CANCELLED, Status.INTERRUPTED)


class Verdict(str, Enum):
    """A performance metric's verdict: candidate ``better`` or ``worse`` than the baseline beyond noise and
    threshold; ``parity`` only when an equivalence test shows the delta inside the margin (``workloads/stats.py``);
    ``inconclusive`` makes no claim (too few repetitions for the noise, or no interval at all), saying why."""

    BETTER = "better"
    WORSE = "worse"
    PARITY = "parity"
    INCONCLUSIVE = "inconclusive"

    def __str__(self) -> str:
        return self.value


class BisectWord(str, Enum):
    """A commit's word in a bisect (``afd-e2e bisect``), as ``git bisect`` says it: ``good`` (like the good
    revision), ``bad`` (shows the regression or the correctness break), ``skipped`` (did not install or start, or
    stayed undecided within the probe budget: ``git bisect skip``)."""

    GOOD = "good"
    BAD = "bad"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value


class ParityVerdict(str, Enum):
    """One parity prompt: ``identical`` token ids; ``close``: at the first differing token each side's token is
    within the other side's top-k logprobs (a near-tie); ``different``; ``not compared`` (a side has no output)."""

    IDENTICAL = "identical"
    CLOSE = "close"
    DIFFERENT = "different"
    NOT_COMPARED = "not compared"

    def __str__(self) -> str:
        return self.value


class Proof(str, Enum):
    """Whether a role's own evidence shows the execution mode its case asked for: ``proven`` (it does),
    ``contradicted`` (it shows another mode: asked graphs, none captured or replayed; asked eager, graphs or
    compilation), ``unproven`` (no evidence either way; the section says what would prove it)."""

    PROVEN = "proven"
    CONTRADICTED = "contradicted"
    UNPROVEN = "unproven"

    def __str__(self) -> str:
        return self.value


class Saturation(str, Enum):
    """Why a bench repetition reached well below the request rate it asked (``workloads.bench.load_of``):
    ``concurrency-bound`` (the client's ``max_concurrency`` was reached: the cap, not the arrivals, set the pace) or
    ``server-bound`` (no cap was reached: the server could not keep up). A warning word, never a failure."""

    CONCURRENCY_BOUND = "concurrency-bound"
    SERVER_BOUND = "server-bound"

    def __str__(self) -> str:
        return self.value
