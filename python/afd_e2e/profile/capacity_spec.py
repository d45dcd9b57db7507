"""``workloads.capacity``: a load sweep that finds the highest load a case carries while it meets an SLO.

```
workloads:
  capacity:
    variable: request_rate          # or max_concurrency
    levels: [2, 4, 8]               # explicit levels, every one run ...
    search: {start: 2, upper: 16, levels: 8}   # ... or a search over this grid (linear, start..upper)
    slo: {ttft_ms: 2000, tpot_ms: 100, attainment: 0.9}
    repetitions: 2                  # per level
```

A level meets the SLO when at least ``attainment`` of its requests meet both targets (vLLM's goodput definition,
``vllm bench serve --goodput ttft:MS tpot:MS``). The dataset, lengths, seed, temperature and load shape
(burstiness, range_ratio, prefix_repetition) are ``workloads.bench``'s, or those of the bench shape ``shape``
names; ``num_prompts`` and the load variable that is not swept default to it too. A ramp is refused: it sets its
own rates, so a level would have no single load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from afd_e2e.profile.bench_spec import bench_spec
from afd_e2e.profile.model import ON_WORSE, Profile
from afd_e2e.profile.reader import Reader

VARIABLES = {"request_rate": "req/s", "max_concurrency": "concurrent requests"}
DEFAULT_ATTAINMENT = 0.9


@dataclass(frozen=True)
class SloSpec:
    """Per-request targets; a level meets the SLO when ``attainment`` of its requests meet both."""

    ttft_ms: float
    tpot_ms: float
    attainment: float = DEFAULT_ATTAINMENT

    def goodput_args(self) -> tuple[str, ...]:
        """``vllm bench serve``'s own goodput flags, so the share is counted by vLLM's definition."""
        return ("--goodput", f"ttft:{self.ttft_ms:g}", f"tpot:{self.tpot_ms:g}")


@dataclass(frozen=True)
class SearchSpec:
    """A grid of ``levels`` loads from ``start`` to ``upper``; the search measures some of them: every
    ``coarse_step``-th going up until one misses, then bisects between the last pass and the first miss."""

    start: float
    upper: float
    levels: int
    coarse_step: int


@dataclass(frozen=True)
class CapacitySpec:
    variable: str  # request_rate | max_concurrency
    levels: tuple[float, ...] | None  # explicit levels (ascending), or None for a search
    search: SearchSpec | None
    slo: SloSpec
    repetitions: int
    num_prompts: int
    request_rate: float  # the rate when max_concurrency is swept (inf: all at once)
    max_concurrency: int  # the bound when request_rate is swept
    warmups: int  # bench repetitions before the first level, not recorded as a level
    far_miss_below: float  # a repetition whose attainment is below this ends its level and every level above
    on_worse: str  # what a comparison judged worse does: fail | warn | note
    parity_threshold_pct: float
    meaningful: bool = True  # False: the numbers mean nothing (smoke_only profiles); the report says so
    shape: str = ""  # the workloads.bench shape whose load shape every level carries; "": workloads.bench's own

    @property
    def unit(self) -> str:
        return VARIABLES[self.variable]

    @property
    def integral(self) -> bool:
        return self.variable == "max_concurrency"

    def grid(self) -> tuple[float, ...]:
        """The levels any case of the run may be measured at, ascending: the explicit ones or the search grid."""
        if self.levels is not None:
            return self.levels
        assert self.search is not None
        s = self.search
        raw = [s.start + (s.upper - s.start) * i / (s.levels - 1) for i in range(s.levels)]
        values = [float(round(v)) if self.integral else float(f"{v:.3g}") for v in raw]
        return tuple(sorted(set(values)))


def _read_search(r: Reader, integral: bool) -> SearchSpec:
    start, upper = r.get("start", float), r.get("upper", float)
    count = r.positive_int("levels", minimum=2)
    if not 0 < start < upper:
        r.fail(r.key("start"), f"needs 0 < start < upper, got start {start:g}, upper {upper:g}", "fix the range")
    if integral and (start != int(start) or upper != int(upper)):
        r.fail(r.key("start"), "max_concurrency levels are whole numbers", "use integers for start and upper")
    step = r.positive_int("coarse_step", max(1, count // 4))
    r.done()
    return SearchSpec(start=start, upper=upper, levels=count, coarse_step=step)


def read_capacity(r: Reader, profile: Profile) -> CapacitySpec:
    """The ``workloads.capacity`` section; a one-line error naming the key and the fix on anything wrong."""
    base = bench_spec(profile)  # read before this section: the performance phase registers before the capacity phase
    if base is None:
        r.fail(r.path, "needs workloads.bench (dataset, lengths, seed)", "add workloads.bench")
    assert base is not None
    shape = r.get("shape", str, "")
    if shape and shape not in dict(base.shapes):
        known = ", ".join(name for name, _ in base.shapes) or "none"
        r.fail(r.key("shape"), f"no workloads.bench shape {shape!r} (shapes: {known})", "name one of them, or drop it")
    bench = base.shape(shape)
    if bench.ramp_up is not None:
        r.fail(
            r.key("shape") if shape else r.path,
            "a ramp sets its own rates, so a level has no single load",
            "sweep a shape without ramp_up (capacity.shape), or drop ramp_up from workloads.bench",
        )
    variable = r.get("variable", str)
    if variable not in VARIABLES:
        r.fail(r.key("variable"), f"unknown load variable {variable!r}", f"use one of: {', '.join(VARIABLES)}")
    integral = variable == "max_concurrency"
    raw_levels = r.get("levels", list, None)
    search_reader = r.child("search", None)
    if (raw_levels is None) == (search_reader is None):
        r.fail(r.path, "needs exactly one of levels and search", "give explicit levels or a search, not both")
    levels = None
    if raw_levels is not None:
        if len(raw_levels) < 1 or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in raw_levels
        ):
            r.fail(r.key("levels"), f"must be positive numbers, got {raw_levels!r}", "write e.g. [2, 4, 8]")
        if integral and any(v != int(v) for v in raw_levels):
            r.fail(r.key("levels"), "max_concurrency levels are whole numbers", "use integers")
        levels = tuple(sorted({float(v) for v in raw_levels}))
    search = _read_search(search_reader, integral) if search_reader is not None else None
    s = r.child("slo")
    assert s is not None
    slo = SloSpec(
        ttft_ms=s.get("ttft_ms", float), tpot_ms=s.get("tpot_ms", float), attainment=s.get("attainment", float, 0.9)
    )
    if slo.ttft_ms <= 0 or slo.tpot_ms <= 0:
        s.fail(s.key("ttft_ms"), "targets must be > 0 ms", "set ttft_ms and tpot_ms to positive milliseconds")
    if not 0 < slo.attainment <= 1:
        s.fail(s.key("attainment"), f"must be in (0, 1], got {slo.attainment:g}", "use a share, e.g. 0.9")
    s.done()
    request_rate = r.get("request_rate", float, bench.request_rate)
    if not request_rate > 0:
        r.fail(r.key("request_rate"), f"must be > 0 or .inf, got {request_rate:g}", "use a positive rate or .inf")
    on_worse = r.get("on_worse", str, "warn")
    if on_worse not in ON_WORSE:
        r.fail(r.key("on_worse"), f"unknown action {on_worse!r}", f"use one of: {', '.join(ON_WORSE)}")
    far = r.get("far_miss_below", float, slo.attainment / 2)
    if not 0 <= far < slo.attainment:
        r.fail(r.key("far_miss_below"), f"must be in [0, attainment), got {far:g}", "use e.g. half the attainment")
    spec = CapacitySpec(
        variable=variable,
        levels=levels,
        search=search,
        slo=slo,
        repetitions=r.positive_int("repetitions", 1),
        num_prompts=r.positive_int("num_prompts", bench.num_prompts),
        request_rate=request_rate if math.isfinite(request_rate) else math.inf,
        max_concurrency=r.positive_int("max_concurrency", bench.max_concurrency),
        warmups=r.positive_int("warmups", 1, minimum=0),
        far_miss_below=far,
        on_worse=on_worse,
        parity_threshold_pct=r.get("parity_threshold_pct", float, bench.parity_threshold_pct),
        meaningful=r.get("meaningful", bool, True),
        shape=shape,
    )
    r.done()
    return spec
