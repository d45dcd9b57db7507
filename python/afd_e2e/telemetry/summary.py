"""What results.json carries of a case's telemetry (pure: from the sampler's samples)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from afd_e2e.plan.model import CasePlan
from afd_e2e.results.model import RoleTelemetry, StallRecord, TelemetrySummary
from afd_e2e.telemetry.watchdog import Sample, Stall

UTIL_PHASE = "performance"  # where a role's mean GPU utilisation is taken


def stall_record(stall: Stall, *, kept: bool = False) -> StallRecord:
    return StallRecord(
        kind=stall.kind,
        phase=stall.phase,
        in_flight=stall.in_flight,
        quiet_s=stall.quiet_s,
        culprit=stall.culprit,
        at_s=round(stall.at_s, 1),
        message=stall.message,
        kept=kept,
    )


def summarize(
    case: CasePlan,
    samples: Sequence[Sample],
    *,
    path: str | None,
    interval_s: float,
    stall_s: float,
    sampler_cpu_s: float,
    stalls: Sequence[StallRecord] = (),
) -> TelemetrySummary:
    roles = []
    for process in case.processes:
        devices = set(process.devices)
        utils = [
            g.util_pct
            for s in samples
            if s.phase == UTIL_PHASE
            for g in s.gpus
            if g.index in devices and g.util_pct is not None
        ]
        readings = [m for s in samples if (m := s.metrics.get(process.name)) is not None]
        kv = [m.kv_cache_usage for m in readings if m.kv_cache_usage is not None]
        preempted = [m.preemptions for m in readings if m.preemptions is not None]
        roles.append(
            RoleTelemetry(
                role=process.name,
                devices=list(process.devices),
                mean_gpu_util_pct=round(sum(utils) / len(utils), 1) if utils else None,
                peak_kv_cache_usage=round(max(kv), 4) if kv else None,
                preemptions=preempted[-1] - preempted[0] if preempted else None,
            )
        )
    return TelemetrySummary(
        path=path,
        samples=len(samples),
        interval_s=interval_s,
        stall_s=stall_s,
        sampler_cpu_s=round(sampler_cpu_s, 3),
        roles=roles,
        stalls=list(stalls),
    )


def telemetry_path(out_dir: Path, case_id: str) -> Path:
    return out_dir / "telemetry" / f"{case_id}.jsonl.gz"
