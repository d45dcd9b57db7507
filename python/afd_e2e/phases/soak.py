"""The ``soak`` phase, defined in this one module: one long ``vllm bench serve`` repetition at a steady load
(``workloads.soak``), judged for **drift** and for **leaks**.

- Drift (``workloads/soak_drift.py``): TPOT and TTFT of the requests that started in the soak's last third against its
  first third, each third cut into ``windows`` windows whose means are the values (overlapping requests share
  batches, so a window's mean, not a request, is the independent unit); the soak fails when a metric's 95% Welch
  interval lies above zero and its delta exceeds ``drift_pct``.
- Leaks (``telemetry/soak_leaks.py``): each role's RSS (all its processes) and, where it has GPUs, its GPU memory, from
  the case's 1 Hz telemetry while the soak ran: the mean of the last third of samples against the first, per 10
  minutes; growth beyond ``leak_mib_per_10min`` fails, naming the role, the kind and the growth.

Profile keys (docs/reference.md): ``workloads.soak.duration_s`` (default 600: the length serving benchmarks soak
for), ``request_rate`` and ``max_concurrency`` (default: ``workloads.bench``'s; the lengths, dataset, seed,
burstiness and range ratio are always the bench's, its ramp and named shapes never), ``windows`` per third
(default 5), ``drift_pct`` (default 10: a 10% slower last third, beyond a 95% interval, is a regression a serving
engineer acts on), ``leak_mib_per_10min`` (default 256: a steady server
holds its pools from start-up, vLLM's KV cache and CUDA graphs included, so a quarter GiB per 10 minutes is hours
from an out-of-memory, never noise at 600 s); ``budgets.soak_s`` (default 1800) bounds the whole phase and its
repetition. The reports show it through ``report/soak_report.py`` (its JUnit testcases and annotation section).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace

from afd_e2e.phases.registry import Budget, Phase, ResultsSection, Workload
from afd_e2e.profile import Profile
from afd_e2e.profile.bench_spec import bench_spec
from afd_e2e.profile.reader import Reader
from afd_e2e.results.redaction import redact_argv
from afd_e2e.results.soak_records import CaseSoak
from afd_e2e.results.status import Status
from afd_e2e.system.executables import resolve_executable
from afd_e2e.telemetry.soak_leaks import judge_leaks, leak_words, memory_series
from afd_e2e.workloads import bench
from afd_e2e.workloads.completions import CompletionError, served_model_root
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome
from afd_e2e.workloads.soak_drift import judge_drift, request_samples

NAME = "soak"
PROGRESS_EVERY_S = 30.0


@dataclass(frozen=True)
class SoakSpec:
    """``workloads.soak``: how long, at which load, and the drift and leak bounds."""

    duration_s: float
    request_rate: float
    max_concurrency: int
    windows: int
    drift_pct: float
    leak_mib_per_10min: float

    @property
    def num_prompts(self) -> int:
        """Requests enough for ``duration_s`` at ``request_rate``: the bench's arrivals then span the duration."""
        return max(1, math.ceil(self.request_rate * self.duration_s))


def read_soak(r: Reader, profile: Profile) -> SoakSpec:
    base = bench_spec(profile)  # read before this section: the performance phase registers before the soak
    if base is None:
        r.fail(r.path, "needs workloads.bench (dataset, lengths, seed)", "add workloads.bench")
    assert base is not None
    spec = SoakSpec(
        duration_s=_positive(r, "duration_s", 600.0),
        request_rate=_positive(r, "request_rate", base.request_rate),
        max_concurrency=r.positive_int("max_concurrency", base.max_concurrency),
        windows=r.positive_int("windows", 5, minimum=2),
        drift_pct=_positive(r, "drift_pct", 10.0),
        leak_mib_per_10min=_positive(r, "leak_mib_per_10min", 256.0),
    )
    r.done()
    return spec


def _positive(r: Reader, name: str, default: float) -> float:
    value = r.get(name, float, default)
    if not value > 0:
        r.fail(r.key(name), f"must be > 0, got {value:g}", f"set {name} to a positive number")
    return value


def _needs_section(profile: Profile) -> tuple[str, str] | None:
    if NAME in profile.workloads:
        return None
    return ("soak phase without workloads.soak", "add workloads.soak (duration_s, and the bounds if not the defaults)")


def run_soak(ctx: PhaseContext) -> PhaseOutcome:
    spec: SoakSpec = ctx.profile.workloads[NAME]
    case = ctx.case
    section = CaseSoak(
        Status.FAILED,
        duration_s=spec.duration_s,
        request_rate=spec.request_rate,
        windows=spec.windows,
        drift_pct=spec.drift_pct,
    )
    try:
        tokenizer = served_model_root(case.base_url, case.served_model_name, timeout_s=ctx.profile.budgets.request_s)
    except CompletionError as exc:
        return _publish(ctx, section, str(exc))
    base = bench_spec(ctx.profile)
    assert base is not None  # the profile reader refuses a soak section without workloads.bench
    load = replace(
        base,
        num_prompts=spec.num_prompts,
        request_rate=spec.request_rate,
        max_concurrency=spec.max_concurrency,
        timeout_s=ctx.profile.budgets.seconds("soak_s"),
        ramp_up=None,  # a ramp is no steady load: its last third would be judged against a lighter first
        shapes=(),  # the named shapes are the performance phase's
    )
    folder = ctx.out_dir / "bench" / case.id
    folder.mkdir(parents=True, exist_ok=True)
    argv = bench.bench_argv(
        resolve_executable(ctx.profile.engine.executable),
        load,
        base_url=case.base_url,
        model=case.served_model_name,
        tokenizer=tokenizer,
        result_dir=folder,
        result_file="soak.json",
        extra=["--save-detailed"],  # each request's start, TTFT and latency: the drift's windows
    )
    ctx.progress(f"soak: {spec.duration_s:g} s at {spec.request_rate:g} req/s ({load.num_prompts} prompts)")
    rep, _ = bench.run_repetition(
        argv,
        result_path=folder / "soak.json",
        log_path=folder / "soak.log",
        num_prompts=load.num_prompts,
        required=(),
        timeout_s=load.timeout_s,
        label="soak",
        progress=ctx.progress,
        cancelled=ctx.cancelled,
        heartbeat_s=PROGRESS_EVERY_S,
        env=bench.client_env(ctx.client_env(bench.PROCESS_NAME)),
        client=ctx.bench_client,
    )
    rel = f"bench/{case.id}/soak"
    section.repetition = replace(rep, index=1, path=f"{rel}.json", log=f"{rel}.log", argv=redact_argv(argv))
    if rep.status is not Status.PASSED:
        status = Status.CANCELLED if ctx.cancelled.is_set() else Status.FAILED
        return _publish(ctx, section, f"soak repetition: {rep.failure}", status)
    samples = request_samples(json.loads((folder / "soak.json").read_text(encoding="utf-8")))
    section.drift = judge_drift(samples, windows=spec.windows, drift_pct=spec.drift_pct)
    devices = {p.name: list(p.devices) for p in case.processes}
    section.leaks = judge_leaks(memory_series(ctx.timeline(), devices, NAME), spec.leak_mib_per_10min)
    failures = [f"drift: {d.reason}" for d in section.drift if not d.passed]
    failures += [f"leak: {leak_words(leak)}" for leak in section.leaks if not leak.passed]
    if not section.leaks:
        failures.append("leak: no role had telemetry samples enough to judge (three in each third of the soak)")
    for line in [d.reason for d in section.drift] + [leak_words(leak) for leak in section.leaks]:
        ctx.progress(f"soak: {line}")
    if failures:
        return _publish(ctx, section, "; ".join(failures))
    return _publish(ctx, section, None, Status.PASSED)


def _publish(ctx: PhaseContext, section: CaseSoak, failure: str | None, status: Status = Status.FAILED) -> PhaseOutcome:
    section.status, section.failure = status, failure
    ctx.record(NAME, section)
    return PhaseOutcome(section.status, section.failure)


SOAK = Phase(
    name=NAME,
    doc="one long repetition at a steady load: TPOT/TTFT drift (last third vs first) and each role's memory growth",
    workloads=(Workload(NAME, read=read_soak),),
    needs=_needs_section,
    budget=Budget("soak_s", 1800.0),
    run=run_soak,
    benches=True,
    sections=(ResultsSection(NAME, CaseSoak),),
)
