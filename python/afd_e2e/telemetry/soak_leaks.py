"""A soak's leak verdict (pure): each role's memory growth per 10 minutes from the case's telemetry samples (as
``sampler.sample_json`` writes them, so a recorded timeline is judged as the live one is).

Per role and kind: RSS is the sum over the role's processes (its server, EngineCore, workers: a leak in any of
them shows), GPU memory the sum over the role's devices (a role without GPUs has none). Growth is judged over
windows, never two samples: the mean of the first third of the soak's samples against the mean of its last third,
over the time between the thirds' mean times, times 600 s. A third's mean smooths the allocator's steps and a
sample's jitter; a steady leak moves it by its rate times the time between the thirds. The bound
(``workloads.soak.leak_mib_per_10min``) is the profile's; a soak's own start (caches filling, first allocations)
is in its first third, so a short soak's bound must be wider than a long one's (the extrapolation to 10 minutes
multiplies whatever settles in its first seconds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from afd_e2e.results.soak_records import GPU_MEMORY, RSS, Leak

PER_S = 600.0  # growth is stated per 10 minutes
MIN_SAMPLES = 3  # per third: fewer is one instant, not a window


def memory_series(
    records: Sequence[Mapping[str, Any]], devices: Mapping[str, Sequence[int]], phase: str
) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(role, kind) -> [(t, MiB)] over the samples taken in ``phase`` from the first whose engine counters moved (a
    bench client still importing is not the soak; the engines' token counters, unlike the requests in flight at
    one instant, move every second of even a light load); ``devices``: each role's GPUs."""
    series: dict[tuple[str, str], list[tuple[float, float]]] = {}
    taken = [r for r in records if r.get("phase") == phase]
    moved = [i for i in range(1, len(taken)) if _tokens(taken[i]) != _tokens(taken[i - 1])]
    for record in taken[moved[0] - 1 :] if moved else taken:
        t = float(record["t"])
        for role, indices in devices.items():
            rss = [p.get("rss_mib") or 0.0 for p in record.get("processes", ()) if p.get("role") == role]
            if rss and sum(rss) > 0:
                series.setdefault((role, RSS), []).append((t, sum(rss)))
            used = [g.get("memory_used_mib") for g in record.get("gpus", ()) if g.get("index") in indices]
            if used and all(u is not None for u in used):
                series.setdefault((role, GPU_MEMORY), []).append((t, sum(used)))
    return series


def judge_leaks(series: Mapping[tuple[str, str], Sequence[tuple[float, float]]], bound: float) -> list[Leak]:
    """Each series with at least ``MIN_SAMPLES`` samples in both its first and last thirds, judged against
    ``bound`` MiB per 10 minutes."""
    found = []
    for (role, kind), points in series.items():
        begin, end = points[0][0], points[-1][0]
        third = (end - begin) / 3.0
        first = [p for p in points if p[0] < begin + third]
        last = [p for p in points if p[0] >= end - third]
        if len(first) < MIN_SAMPLES or len(last) < MIN_SAMPLES:
            continue
        first_mib, last_mib = _mean([m for _, m in first]), _mean([m for _, m in last])
        between = _mean([t for t, _ in last]) - _mean([t for t, _ in first])
        growth = (last_mib - first_mib) / between * PER_S
        found.append(
            Leak(
                role,
                kind,
                round(first_mib, 1),
                round(last_mib, 1),
                len(points),
                round(growth, 1),
                bound,
                growth <= bound,
            )
        )
    return found


def leak_words(leak: Leak) -> str:
    """``server RSS grew 1843.0 MiB per 10 min (412.3 -> 980.1 MiB), bound 3000 MiB``."""
    return (
        f"{leak.role} {leak.kind} grew {leak.growth_mib_per_10min:g} MiB per 10 min "
        f"({leak.first_mib:g} -> {leak.last_mib:g} MiB), bound {leak.bound_mib_per_10min:g} MiB"
    )


def _tokens(record: Mapping[str, Any]) -> list[float | None]:
    """Every role's prompt and generated token counters in one sample (None where a role did not answer)."""
    return [
        (m or {}).get(key)
        for _, m in sorted(record.get("metrics", {}).items())
        for key in ("prompt_tokens", "generation_tokens")
    ]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)
