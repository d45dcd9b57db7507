"""A capacity sweep on one ready case: levels measured with ``vllm bench serve --goodput`` on the case's one launch,
chosen by ``level_search.next_level``, within ``budgets.capacity_s``.

Each repetition is read by the strict bench reader; its attainment is vLLM's own goodput count (requests meeting
both targets) over its completed requests. A repetition that misses by far ends its level (the other repetitions
would only confirm it) and the levels above it. When the budget runs out the running repetition is stopped and the
best bracket found so far is reported, marked cut short. Every finished level is published at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from afd_e2e.profile.bench_spec import LATENCY_PERCENTILES, BenchSpec, percentile_key
from afd_e2e.profile.capacity_spec import CapacitySpec
from afd_e2e.results.capacity_records import CapacityLevel, CapacitySlo, CaseCapacity
from afd_e2e.results.performance_records import Repetition
from afd_e2e.results.redaction import redact_argv
from afd_e2e.results.status import Status
from afd_e2e.workloads import bench, stats
from afd_e2e.workloads.capacity_sweep.level_search import Observation, SearchPlan, estimate, format_level, next_level

# The latencies a level keeps each measured percentile of; vLLM's median is the p50, kept under its own name.
LEVEL_LATENCIES = ("ttft", "tpot", "itl")


def level_key(stem: str, percentile: int) -> str:
    """A level metric's key: ``median_ttft_ms`` for the p50, ``p90_ttft_ms`` and so on for the others."""
    return f"median_{stem}_ms" if percentile == 50 else percentile_key(stem, percentile)


# The figures kept per level (means over its passed repetitions): throughputs, goodput, and every measured percentile
# of TTFT, TPOT and ITL, so that the plot can draw the one the SLO's attainment names.
LEVEL_METRICS = (
    "request_throughput",
    "output_throughput",
    "request_goodput",
    *(level_key(stem, p) for stem in LEVEL_LATENCIES for p in LATENCY_PERCENTILES),
)


@dataclass(frozen=True)
class SloPercentile:
    """The latency percentile a capacity plot draws for an SLO: ``percentile``, and whether it is the one the
    attainment names (``exact``) or the nearest measured one (``note`` says which and why)."""

    percentile: int
    exact: bool
    note: str


def slo_percentile(attainment: float) -> SloPercentile:
    """The measured percentile that an attainment target names. "90% of requests within TTFT t" is "p90 TTFT <= t",
    so a level meets a one-target SLO exactly where its p90 crosses the target (with two targets, the one that binds
    crosses there; the other stays under). A target between measured percentiles takes the next one above it (p99
    for 95%: where p99 is within the target, p95 is too), and one above every measured percentile the highest."""
    share = round(attainment * 100, 6)
    exact = next((p for p in LATENCY_PERCENTILES if p == share), None)
    if exact is not None:
        return SloPercentile(exact, True, "")
    above = next((p for p in LATENCY_PERCENTILES if p > share), None)
    if above is not None:
        return SloPercentile(above, False, f"p{above}: the first measured percentile above the {share:g}% target")
    top = LATENCY_PERCENTILES[-1]
    return SloPercentile(top, False, f"p{top}: the highest measured percentile, below the {share:g}% target")


def level_metrics(repetitions: Sequence[Repetition]) -> dict[str, float]:
    """Each LEVEL_METRICS key's mean over the passed repetitions that carry it. A report reads a level recorded
    before a key was kept from its repetitions by this same rule (each repetition keeps every bench key)."""
    passed = [rep for rep in repetitions if rep.status is Status.PASSED]
    figures = {}
    for key in LEVEL_METRICS:
        values = [rep.metrics[key] for rep in passed if key in rep.metrics]
        if values:
            figures[key] = stats.mean(values)
    return figures


def level_bench(spec: CapacitySpec, bench_spec: BenchSpec, level: float) -> BenchSpec:
    """The bench settings of one level: the swept variable at ``level``, the other one fixed."""
    if spec.variable == "request_rate":
        return replace(
            bench_spec, num_prompts=spec.num_prompts, request_rate=level, max_concurrency=spec.max_concurrency
        )
    return replace(bench_spec, num_prompts=spec.num_prompts, request_rate=spec.request_rate, max_concurrency=int(level))


def attainment(rep: Repetition) -> float | None:
    """The share of a passed repetition's requests that met both SLO targets (vLLM's goodput x duration)."""
    goodput, duration = rep.metrics.get("request_goodput"), rep.duration_s
    if rep.status is not Status.PASSED or goodput is None or duration is None or not rep.completed:
        return None
    return min(round(goodput * duration) / rep.completed, 1.0)


def summarise_level(
    level: float, repetitions: Sequence[Repetition], far_miss_below: float, target: float
) -> CapacityLevel:
    """A level's record from its repetitions: means of the level metrics, pooled attainment, SLO met or not."""
    passed = [rep for rep in repetitions if rep.status is Status.PASSED]
    record = CapacityLevel(level=level, status=Status.PASSED, repetitions=list(repetitions))
    failed = [rep for rep in repetitions if rep.status is not Status.PASSED]
    if failed:
        record.status = Status.CANCELLED if failed[0].status is Status.CANCELLED else Status.FAILED
        record.failure = f"repetition {failed[0].index}: {failed[0].failure}"
    shares = [a for rep in passed if (a := attainment(rep)) is not None]
    record.attainments = shares
    if passed:
        good = sum(round(rep.metrics["request_goodput"] * (rep.duration_s or 0.0)) for rep in passed)
        record.attainment = min(good / sum(rep.completed or 0 for rep in passed), 1.0)
        record.meets_slo = record.attainment >= target
        record.far_miss = any(share < far_miss_below for share in shares)
        record.metrics = level_metrics(passed)
    return record


def observation(record: CapacityLevel) -> Observation | None:
    """What the search learns from a level; a level that failed without a passed repetition reads as a far miss
    (the case could not carry that load); one stopped by a cancel or the budget teaches nothing."""
    if record.attainment is not None and record.status is not Status.CANCELLED:
        return Observation(record.attainment, tuple(record.attainments), record.far_miss)
    if record.status is Status.FAILED:
        return Observation(0.0, (), True)
    return None


class Deadline:
    """``budgets.capacity_s`` from the sweep's start; ``now`` is injectable for tests."""

    def __init__(self, seconds: float, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self.ends = now() + seconds

    def left(self) -> float:
        return self.ends - self._now()


def run_sweep(
    spec: CapacitySpec,
    bench_spec: BenchSpec,
    *,
    executable: str,
    base_url: str,
    model: str,
    tokenizer: str,
    out_dir: Path,
    case_id: str,
    gpus: int,
    required: Sequence[float],
    budget_s: float,
    publish: Callable[[CaseCapacity], None],
    progress: Callable[[str], None],
    cancelled: threading.Event,
    heartbeat_s: float,
    env: Mapping[str, str],
    client: bench.WarmClient | None,
    levels: Sequence[float] | None = None,
) -> CaseCapacity:
    """Warmups, then levels until the search is done, the budget runs out or the run is cancelled; the case's
    ``capacity`` section; ``env``: each bench's environment (``bench.client_env``); ``client``: the warm client the
    benches run in (the case's, which imported vLLM while its servers started), None: each a process of its own.
    ``levels`` overrides the profile's grid (the curve recorder measures every level)."""
    started = time.monotonic()
    deadline = Deadline(budget_s)
    grid = tuple(levels) if levels is not None else spec.grid()
    plan = SearchPlan(
        grid=grid,
        target=spec.slo.attainment,
        search=spec.search is not None and levels is None,
        coarse_step=spec.search.coarse_step if spec.search else 1,
        required=tuple(lv for lv in required if lv in grid),
    )
    section = CaseCapacity(
        status=Status.RUNNING,
        variable=spec.variable,
        unit=spec.unit,
        slo=CapacitySlo(spec.slo.ttft_ms, spec.slo.tpot_ms, spec.slo.attainment),
        search=plan.search,
        grid=list(grid),
        gpus=gpus,
        meaningful=spec.meaningful,
    )
    folder = out_dir / "capacity" / case_id
    folder.mkdir(parents=True, exist_ok=True)
    cut_short = False

    def repetition(level: float, stem: str, label: str) -> tuple[Repetition, bool]:
        """One bench run bounded by its own budget and what is left of the sweep's; (repetition, budget ran out)."""
        left = deadline.left()
        if left <= 0:
            return Repetition(0, Status.CANCELLED, "budgets.capacity_s ran out", "", ""), True
        argv = bench.bench_argv(
            executable,
            level_bench(spec, bench_spec, level),
            base_url=base_url,
            model=model,
            tokenizer=tokenizer,
            result_dir=folder,
            result_file=f"{stem}.json",
            extra=spec.slo.goodput_args(),
        )
        timeout_s = min(bench_spec.timeout_s, left)
        rep, ended = bench.run_repetition(
            argv,
            result_path=folder / f"{stem}.json",
            log_path=folder / f"{stem}.log",
            num_prompts=spec.num_prompts,
            required=LEVEL_METRICS,
            timeout_s=timeout_s,
            label=label,
            progress=progress,
            cancelled=cancelled,
            heartbeat_s=heartbeat_s,
            env=env,
            client=client,
        )
        rel = f"capacity/{case_id}/{stem}"
        rep = replace(rep, path=f"{rel}.json", log=f"{rel}.log", argv=redact_argv(argv))
        out_of_budget = not ended and not cancelled.is_set() and timeout_s < bench_spec.timeout_s
        if out_of_budget:
            rep.status, rep.failure = Status.CANCELLED, f"stopped: budgets.capacity_s ({budget_s:g} s) ran out"
        return rep, out_of_budget

    for index in range(1, spec.warmups + 1):
        if cancelled.is_set() or not grid:
            break
        progress(f"capacity warmup {index}/{spec.warmups} at {format_level(grid[0])} {spec.unit}")
        rep, cut_short = repetition(grid[0], f"warmup-{index}", f"capacity warmup {index}")
        section.warmups.append(replace(rep, index=index))
        publish(section)
        if cut_short:
            break

    observed: dict[float, Observation] = {}
    while not cut_short and not cancelled.is_set() and (level := next_level(plan, observed)) is not None:
        reps: list[Repetition] = []
        for index in range(1, spec.repetitions + 1):
            label = f"capacity {format_level(level)} {spec.unit} rep {index}/{spec.repetitions}"
            rep, cut_short = repetition(level, f"level-{format_level(level)}-rep-{index}", label)
            reps.append(replace(rep, index=index))
            share = attainment(reps[-1])
            progress(f"{label}: {_said(rep, share, spec.slo.attainment)}")
            if rep.status is not Status.PASSED or (share is not None and share < spec.far_miss_below):
                break
        stopped = reps.pop() if cut_short else None  # the repetition the budget stopped measures nothing
        record = summarise_level(level, reps, spec.far_miss_below, spec.slo.attainment)
        if record.far_miss and len(reps) < spec.repetitions:
            record.note = f"missed by far (attainment below {spec.far_miss_below:.0%}): other repetitions skipped"
        if stopped is not None:
            record.note = f"budgets.capacity_s ran out after {len(reps)} of {spec.repetitions} repetitions"
            if not reps:
                record.status = Status.SKIPPED
        section.levels = sorted([*section.levels, record], key=lambda r: r.level)
        if (obs := observation(record)) is not None:
            observed[level] = obs
        if record.status is Status.FAILED and section.failure is None:
            section.failure = f"level {format_level(level)} {spec.unit}: {record.failure}"
        section.estimate = estimate(plan, observed, unit=spec.unit)
        publish(section)
    section.estimate = estimate(plan, observed, unit=spec.unit, cut_short=cut_short)
    if cancelled.is_set():
        section.status, section.failure = Status.CANCELLED, section.failure or "cancelled"
    elif section.failure:
        section.status = Status.FAILED
    else:
        section.status = Status.PASSED
    section.wall_s = round(time.monotonic() - started, 3)
    progress(f"capacity: {section.estimate.text}")
    publish(section)
    return section


def _said(rep: Repetition, share: float | None, target: float) -> str:
    """A repetition in the progress log: whether its level met the SLO, not only whether the bench ran (a bench
    that ran and missed the SLO read "passed, attainment 9%")."""
    if rep.status is Status.PASSED and share is not None:
        return f"attainment {share:.0%}, {'meets' if share >= target else 'misses'} the SLO (target {target:.0%})"
    return (
        f"{rep.status}"
        + (f", attainment {share:.0%}" if share is not None else "")
        + (f" ({rep.failure})" if rep.failure else "")
    )
