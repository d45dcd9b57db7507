"""A soak's drift verdict (pure): TPOT and TTFT in the soak's last third against its first, from the per-request
records of its one long ``vllm bench serve`` repetition (``--save-detailed``: each request's start time, TTFT,
latency and output length).

Judged over windows, never one request: each third is cut into ``windows`` equal windows of time by each request's
start, and each window's mean is one value. Per-request samples would overstate what the run knows: requests that
overlap share the engine's batches, so their TPOTs rise and fall together, and Welch's interval on them would be
as narrow as if each were independent. A window of several seconds spans many batches and arrivals, so its mean is
close to independent of the next window's, and Welch's interval on the window means (``stats.judge``, its degrees
of freedom from the windows) says what the run supports. A metric is ``worse`` (the soak fails) when the 95%
interval of last minus first lies above zero and the delta exceeds ``drift_pct``; faster, parity or inconclusive
pass (a warm-up that makes the first third slower is not a drift), and the reason says what was seen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from afd_e2e.errors import UsageError
from afd_e2e.results.soak_records import Drift
from afd_e2e.results.status import Verdict
from afd_e2e.workloads import stats

METRICS = ("TPOT", "TTFT")
MIN_WINDOWS = 2  # per third: Welch needs two values a side


@dataclass(frozen=True)
class RequestSample:
    """One request of the soak: when it started (s after the first) and its latencies (TPOT None for one token)."""

    start_s: float
    ttft_ms: float
    tpot_ms: float | None

    def value(self, metric: str) -> float | None:
        return self.ttft_ms if metric == "TTFT" else self.tpot_ms


def request_samples(data: Mapping[str, Any]) -> list[RequestSample]:
    """The successful requests of a ``--save-detailed`` result, by start; a result without the per-request lists
    is refused (the bench ran without ``--save-detailed``, or another vLLM wrote it)."""
    try:
        starts, ttfts, latencies = data["start_times"], data["ttfts"], data["latencies"]
        lengths, errors = data["output_lens"], data.get("errors") or [""] * len(starts)
    except KeyError as exc:
        raise UsageError(f"soak result has no {exc.args[0]}", "run vllm bench serve with --save-detailed") from exc
    if not starts:
        return []
    first = min(starts)
    found = []
    for start, ttft, latency, length, error in zip(starts, ttfts, latencies, lengths, errors, strict=True):
        if error or not ttft:
            continue
        tpot = (latency - ttft) / (length - 1) * 1000.0 if length > 1 else None
        found.append(RequestSample(start - first, ttft * 1000.0, tpot))
    return sorted(found, key=lambda s: s.start_s)


def thirds(samples: Sequence[RequestSample], windows: int, metric: str) -> tuple[list[float], list[float]]:
    """The window means of ``metric`` in the first and the last third of the soak's span of starts (a window
    without a request has no mean)."""
    if not samples:
        return [], []
    span = samples[-1].start_s
    third = span / 3.0
    width = third / windows if third > 0 else 1.0

    def means(begin: float) -> list[float]:
        found = []
        for k in range(windows):
            low, high = begin + k * width, begin + (k + 1) * width
            last = begin > 0 and k == windows - 1  # the soak's last start closes its last window
            values = [
                v
                for s in samples
                if low <= s.start_s < high or (last and s.start_s == high)
                if (v := s.value(metric)) is not None
            ]
            if values:
                found.append(stats.mean(values))
        return found

    return means(0.0), means(2.0 * third)


def judge_drift(samples: Sequence[RequestSample], *, windows: int, drift_pct: float) -> list[Drift]:
    """TPOT and TTFT judged: ``worse`` fails; fewer than two windows with requests in a third fails too (the soak
    is too short or too sparse to judge, and a gate that cannot judge must not pass)."""
    found = []
    for metric in METRICS:
        first, last = thirds(samples, windows, metric)
        rounded = [round(v, 3) for v in first], [round(v, 3) for v in last]
        if len(first) < MIN_WINDOWS or len(last) < MIN_WINDOWS:
            reason = (
                f"{len(first)} and {len(last)} windows with requests in the first and last thirds, "
                f"{MIN_WINDOWS} needed: raise workloads.soak.request_rate or duration_s"
            )
            found.append(Drift(metric, *rounded, None, None, Verdict.INCONCLUSIVE, False, reason))
            continue
        judged = stats.judge(
            stats.Summary.of(first),
            stats.Summary.of(last),
            threshold_pct=drift_pct,
            margin_pct=drift_pct,
            higher_is_better=False,
        )
        delta = None if judged.delta_pct is None else round(judged.delta_pct, 2)
        ci = None if judged.ci95_pct is None else [round(b, 2) for b in judged.ci95_pct]
        passed = judged.verdict is not Verdict.WORSE
        reason = judged.reason or drift_words(metric, first, last, delta, ci, drift_pct)
        found.append(Drift(metric, *rounded, delta, ci, judged.verdict, passed, reason))
    return found


def drift_words(
    metric: str,
    first: Sequence[float],
    last: Sequence[float],
    delta: float | None,
    ci: Sequence[float] | None,
    drift_pct: float,
) -> str:
    """``TPOT 1.52 ms -> 6.80 ms (+347.4%, 95% interval [+290.1%, +404.7%], bound +50%)``."""
    shown = f"{metric} {stats.mean(first):.2f} ms -> {stats.mean(last):.2f} ms"
    if delta is None or ci is None:
        return shown
    return f"{shown} ({delta:+.1f}%, 95% interval [{ci[0]:+.1f}%, {ci[1]:+.1f}%], bound +{drift_pct:g}%)"
