"""The ``warmup`` phase, defined in this one module: ``workloads.warmup.requests`` greedy completions of the smoke
prompt, one after another, before the phases that measure, so the first measured request or repetition does not pay
for a cold engine (its first requests compile kernels, capture graphs and fill caches). Each request's latency is
recorded in the case's ``warmup`` section, first to last: the first is the cold one, and how far the last fell
below it is what the warm-up bought. A request that gets no completion fails the phase (the engine cannot serve);
a slow one does not (this phase judges nothing about speed).

Profile keys (docs/reference.md): ``workloads.warmup.requests`` (default 4), ``workloads.warmup.max_tokens``
(default: the smoke's), ``workloads.warmup.prompt`` (default: the smoke's); ``budgets.warmup_s`` (default 300) for
the whole phase. Listed in a case's ``phases`` after ``smoke``; the reports show its JUnit testcase (``warmup``,
from the section's status and failure) with no renderer of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from afd_e2e.phases.registry import Budget, Phase, ResultsSection, Workload
from afd_e2e.phases.smoke import smoke_spec
from afd_e2e.profile import Profile
from afd_e2e.profile.reader import Reader
from afd_e2e.results.status import Status
from afd_e2e.workloads.completions import CompletionError, complete
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome

NAME = "warmup"
DEFAULT_REQUESTS = 4


@dataclass(frozen=True)
class WarmupSpec:
    """``workloads.warmup``: how many completions of which prompt, and how long each may be."""

    requests: int
    prompt: str
    max_tokens: int


@dataclass
class WarmupResult:
    """The ``warmup`` section of a case: each request's latency in seconds, in the order sent."""

    status: Status
    failure: str | None = None
    latencies_s: list[float] = field(default_factory=list)
    first_s: float | None = None  # the cold request
    last_s: float | None = None  # the warmest


def read_warmup(r: Reader, profile: Profile) -> WarmupSpec:
    smoke = smoke_spec(profile)
    spec = WarmupSpec(
        requests=r.positive_int("requests", DEFAULT_REQUESTS),
        prompt=r.get("prompt", str, smoke.prompt),
        max_tokens=r.positive_int("max_tokens", smoke.max_tokens),
    )
    r.done()
    return spec


def spec_of(profile: Profile) -> WarmupSpec:
    """The profile's ``workloads.warmup``, or the defaults when the profile has none."""
    found = profile.workloads.get(NAME)
    smoke = smoke_spec(profile)
    return found or WarmupSpec(DEFAULT_REQUESTS, smoke.prompt, smoke.max_tokens)


def warm_up(
    spec: WarmupSpec,
    send: Callable[[], object],
    *,
    stopped: Callable[[], bool],
    clock: Callable[[], float] = time.monotonic,
) -> WarmupResult:
    """``spec.requests`` calls of ``send`` (one completion each), timed by ``clock``; the first that raises
    ``CompletionError`` ends the phase, failed, naming the request. ``stopped`` ends it early, cancelled."""
    result = WarmupResult(Status.PASSED)
    for number in range(1, spec.requests + 1):
        if stopped():
            result.status, result.failure = Status.CANCELLED, f"stopped after {number - 1} of {spec.requests} requests"
            break
        started = clock()
        try:
            send()
        except CompletionError as exc:
            result.status, result.failure = Status.FAILED, f"request {number} of {spec.requests}: {exc}"
            break
        result.latencies_s.append(round(clock() - started, 4))
    if result.latencies_s:
        result.first_s, result.last_s = result.latencies_s[0], result.latencies_s[-1]
    return result


def run_warmup(ctx: PhaseContext) -> PhaseOutcome:
    spec = spec_of(ctx.profile)
    case, timeout_s = ctx.case, ctx.profile.budgets.request_s

    def send() -> object:
        return complete(
            case.base_url, case.served_model_name, spec.prompt, max_tokens=spec.max_tokens, timeout_s=timeout_s
        )

    result = warm_up(spec, send, stopped=ctx.cancelled.is_set)
    ctx.record(NAME, result)
    if result.latencies_s:
        ctx.progress(f"warmup: {len(result.latencies_s)} requests, first {result.first_s} s, last {result.last_s} s")
    return PhaseOutcome(result.status, result.failure)


WARMUP = Phase(
    name=NAME,
    doc="a few completions before the phases that measure, each one's latency recorded: the first is the cold one",
    workloads=(Workload(NAME, read=read_warmup),),
    budget=Budget("warmup_s", 300.0),
    run=run_warmup,
    sections=(ResultsSection(NAME, WarmupResult),),
)
