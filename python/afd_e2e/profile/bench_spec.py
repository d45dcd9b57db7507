"""``workloads.bench``: how the performance phase loads a case with ``vllm bench serve`` and what its comparisons
judge: the load shape (dataset, lengths, prompts, rate or ramp, concurrency, burstiness, shared prefixes), the
warmups and repetitions (a fixed count, or a range added to until decided, alternating repetitions or blocks), the
metrics and their gates (``on_worse``, ``margin_pct``, ``require: parity``, ``detect_pct``) and the named
``shapes`` each case is measured under after it.

The section is registered by the performance phase (``afd_e2e.phases.performance``, as ``Workload("bench",
read=read_bench)``) and kept in ``Profile.workloads``; ``bench_spec`` is its one typed accessor. It lives here, in
the profile layer, because the layers below the phases read it too: the plan's series (``plan/series.py``), the
runner's ranged series, the bench driver and the comparison (``workloads/``), preflight's load-shape flags, the
capacity sweep's and the soak's readers (each level or the soak's one repetition is a ``BenchSpec``) and a bisect's
bench metrics.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from afd_e2e.profile.model import CASE_ID, ON_WORSE, Profile
from afd_e2e.profile.reader import Reader

NAME = "bench"  # the profile section, ``workloads.bench``


@dataclass(frozen=True)
class BenchMetric:
    key: str  # a ``vllm bench serve`` result key
    name: str
    unit: str
    higher_is_better: bool


# The latencies ``vllm bench serve`` reports (its ``--percentile-metrics``: key stem, name) and the percentiles it is
# asked for (``--metric-percentiles``): every repetition keeps each as ``p<P>_<stem>_ms``, so each is a metric a
# profile can gate, and the capacity plot draws the one its SLO's attainment names.
LATENCIES = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2E latency"))
LATENCY_PERCENTILES = (50, 90, 99)


def percentile_key(stem: str, percentile: int) -> str:
    """The bench result key of one latency percentile (``p90_tpot_ms``)."""
    return f"p{percentile}_{stem}_ms"


# What a comparison shows without ``workloads.bench.metrics``: the throughputs, each latency's mean and its p99 (the
# tail a serving SLO is usually written on). p50 and p90 are gateable (BENCH_METRICS) but not shown unasked, so a
# profile's table keeps one row per metric it has always had.
DEFAULT_BENCH_METRICS = (
    BenchMetric("request_throughput", "Request throughput", "req/s", True),
    BenchMetric("output_throughput", "Output throughput", "tok/s", True),
    *(BenchMetric(f"mean_{stem}_ms", name, "ms", False) for stem, name in LATENCIES),
    *(BenchMetric(percentile_key(stem, 99), f"{name} p99", "ms", False) for stem, name in LATENCIES),
)
# Every metric a profile may name in ``workloads.bench.metrics`` (and ``afd-e2e bisect --metric``): the default set
# and every other measured percentile of every latency.
BENCH_METRICS = (
    *DEFAULT_BENCH_METRICS,
    *(
        BenchMetric(percentile_key(stem, p), f"{name} p{p}", "ms", False)
        for p in LATENCY_PERCENTILES
        if p != 99
        for stem, name in LATENCIES
    ),
)


# Default equivalence margins (``workloads.bench.margin_pct``), in % of the baseline: a throughput within 3% is the
# same capacity plan (the seed's steady-state throughput varies by 0.4-0.8% between repetitions, so 3-5 repetitions
# a side reach ±3%), a latency within 5% is below what a user of a serving SLO notices and above the run-to-run
# noise of a mean latency (the seed's TTFT varies by 3.6%, its TPOT by 0.8%).
DEFAULT_MARGIN_PCT = {"throughput": 3.0, "latency": 5.0}
REQUIRES = ("", "parity")  # ``require: parity``: a metric that must be shown equivalent, inconclusive fails it
GATED_THROUGHPUT = ("per_gpu", "total")
# How a ranged comparison's two cases alternate (``workloads.bench.alternation``): one repetition each with both
# servers up (``repetitions``), a fresh launch of each side per block of repetitions (``blocks``: a pair that
# shares its devices cannot keep both up), or whichever the pair allows (``auto``; ``plan/series.py`` decides).
ALTERNATIONS = ("auto", "repetitions", "blocks")


@dataclass(frozen=True)
class MetricGate:
    """A metric a performance comparison judges, and what a ``worse`` verdict on it does: ``fail`` fails the
    comparison, ``warn`` passes it with a warning, ``note`` only shows it. ``margin_pct``: the ±% within which it is
    ``parity``; ``require: parity`` also fails it when ``inconclusive``; ``detect_pct``: the change it must be able to
    see."""

    metric: BenchMetric
    on_worse: str
    margin_pct: float = 0.0
    require: str = ""
    # The widest smallest-detectable change the comparison may have: its repetitions must be able to see a change
    # this large (80% power), else the metric fails saying how many repetitions would (None: not asked).
    detect_pct: float | None = None

    @property
    def gated(self) -> bool:
        """Whether a verdict on it can fail the comparison: what repetitions are added to decide."""
        return self.on_worse == "fail" or self.require == "parity" or self.detect_pct is not None


# Load shapes (``workloads.bench`` and each of its ``shapes``): how requests arrive and what they hold, each key one
# flag of ``vllm bench serve`` (``workloads/bench.py``'s ``shape_argv`` is the one map; preflight asks the installed
# client for each flag it adds). ``ramp_up``'s strategies are ``--ramp-up-strategy``'s choices.
RAMP_UP_STRATEGIES = ("linear", "exponential")
PREFIX_REPETITION = "prefix_repetition"  # the dataset of shared prefixes (prefix caching)


@dataclass(frozen=True)
class RampUp:
    """``ramp_up: {strategy, start, end}``: the request rate grows from ``start`` to ``end`` req/s over the
    repetition (vLLM's ``--ramp-up-strategy``, ``--ramp-up-start-rps``, ``--ramp-up-end-rps``: whole req/s, and
    ``--request-rate`` left at inf, as vLLM requires)."""

    strategy: str
    start: int
    end: int


@dataclass(frozen=True)
class PrefixRepetition:
    """``dataset: prefix_repetition``'s prompts: ``num_prefixes`` shared prefixes of ``prefix_len`` tokens, each
    prompt one of them plus ``suffix_len`` tokens of its own (vLLM's ``--prefix-repetition-*``)."""

    prefix_len: int
    suffix_len: int
    num_prefixes: int


@dataclass(frozen=True)
class BenchSpec:
    dataset: str
    input_len: int
    output_len: int
    num_prompts: int
    request_rate: float
    max_concurrency: int
    temperature: float
    seed: int
    warmups: int
    repetitions: int  # the fixed count, or a range's min
    parity_threshold_pct: float
    timeout_s: float  # budgets.bench_repetition_s, carried here for the bench driver
    metrics: tuple[MetricGate, ...]
    max_repetitions: int = 0  # a range's max (``repetitions: {min, max}``); equal to ``repetitions`` when fixed
    gated_throughput: str = "per_gpu"  # where the cases' GPU counts differ: which throughput view is gated
    alternation: str = "auto"  # ALTERNATIONS
    block_size: int = 0  # repetitions per added block of a ``blocks`` series; 0: the range's min
    burstiness: float = 1.0  # 1: Poisson arrivals; below 1 burstier (gamma), above 1 more even
    ramp_up: RampUp | None = None
    range_ratio: float = 0.0  # random lengths drawn from [len x (1 - r), len x (1 + r)]; 0: every prompt alike
    prefix: PrefixRepetition | None = None  # set exactly when ``dataset`` is prefix_repetition
    # the named shapes each case is measured under after this one (``workloads.bench.shapes``), each a BenchSpec of
    # its own (this one's keys with the shape's overrides, fixed repetitions, no shapes of its own)
    shapes: tuple[tuple[str, BenchSpec], ...] = ()

    @property
    def ranged(self) -> bool:
        return self.max_repetitions > self.repetitions

    def shape(self, name: str) -> BenchSpec:
        """The named shape's settings; "" is ``workloads.bench``'s own (KeyError for a name it has not)."""
        return dict(self.shapes)[name] if name else self

    @property
    def most_repetitions(self) -> int:
        return max(self.repetitions, self.max_repetitions)

    @property
    def block(self) -> int:
        """The repetitions of each block after a side's first (its case's own ``min``)."""
        return self.block_size or self.repetitions


def _read_repetitions(r: Reader) -> tuple[int, int]:
    """``repetitions: N`` or ``repetitions: {min: A, max: B}`` (added one at a time after A until decided)."""
    if not isinstance(r.data.get("repetitions"), dict):
        count = r.positive_int("repetitions")
        return count, count
    g = r.child("repetitions")
    assert g is not None
    low, high = g.positive_int("min", minimum=2), g.positive_int("max", minimum=2)
    if high < low:
        g.fail(g.key("max"), f"{high} is below min {low}", "set max to at least min")
    g.done()
    return low, high


def _read_margins(r: Reader) -> dict[str, float]:
    """``margin_pct: N`` (every metric) or ``{throughput: N, latency: M}``; the defaults are justified beside
    ``DEFAULT_MARGIN_PCT``."""
    value = r.data.get("margin_pct")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        margin = _positive_pct(r, "margin_pct", r.get("margin_pct", float))
        return dict.fromkeys(DEFAULT_MARGIN_PCT, margin)
    g = r.child("margin_pct", None)
    if g is None:
        return dict(DEFAULT_MARGIN_PCT)
    margins = {
        kind: _positive_pct(g, kind, g.get(kind, float, default)) for kind, default in DEFAULT_MARGIN_PCT.items()
    }
    g.done()
    return margins


def _positive_pct(r: Reader, name: str, value: float) -> float:
    if not value > 0:
        r.fail(r.key(name), f"must be > 0 percent, got {value:g}", f"set {name} to a positive percentage")
    return value


def read_bench(r: Reader, profile: Profile) -> BenchSpec:
    """The ``workloads.bench`` section; a one-line error naming the key and the fix on anything wrong. Each
    repetition's timeout is ``budgets.bench_repetition_s``, carried here for the bench driver."""
    if "timeout_s" in r.data:  # an old profile's key, refused with its new home so it fails with one clear line
        r.fail(
            r.key("timeout_s"),
            "moved to budgets.bench_repetition_s",
            f"replace it with `budgets: {{bench_repetition_s: {r.data['timeout_s']}}}`",
        )
    low, high = _read_repetitions(r)
    margins = _read_margins(r)
    gated_throughput = r.get("gated_throughput", str, "per_gpu")
    if gated_throughput not in GATED_THROUGHPUT:
        r.fail(
            r.key("gated_throughput"),
            f"unknown view {gated_throughput!r}",
            f"use one of: {', '.join(GATED_THROUGHPUT)}",
        )
    alternation, block_size = _read_alternation(r, low, high)
    ramp_up = _read_ramp_up(r.child("ramp_up", None))
    spec = BenchSpec(
        dataset=r.get("dataset", str, "random"),
        input_len=r.positive_int("input_len"),
        output_len=r.positive_int("output_len"),
        num_prompts=r.positive_int("num_prompts"),
        request_rate=_read_request_rate(r, ramp_up, None),
        max_concurrency=r.positive_int("max_concurrency"),
        temperature=r.get("temperature", float, 0.0),
        seed=r.get("seed", int, 0),
        warmups=r.positive_int("warmups", 1, minimum=0),
        repetitions=low,
        parity_threshold_pct=r.get("parity_threshold_pct", float, 2.0),
        timeout_s=profile.budgets.bench_repetition_s,
        metrics=_read_metric_gates(r.child("metrics", None), margins),
        max_repetitions=high,
        gated_throughput=gated_throughput,
        alternation=alternation,
        block_size=block_size,
        ramp_up=ramp_up,
    )
    spec = _read_load_shape(r, spec)
    shapes = r.child("shapes", None)
    if shapes is not None:
        spec = dataclasses.replace(spec, shapes=tuple(_read_shapes(shapes, spec, margins)))
    r.done()
    return spec


def _read_ramp_up(r: Reader | None) -> RampUp | None:
    """``ramp_up: {strategy: linear | exponential, start: N, end: M}`` in whole req/s (vLLM's ``--ramp-up-*-rps``
    are integers); vLLM refuses start above end, and a start of 0 for an exponential ramp."""
    if r is None:
        return None
    strategy = r.get("strategy", str)
    if strategy not in RAMP_UP_STRATEGIES:
        r.fail(r.key("strategy"), f"unknown strategy {strategy!r}", f"use one of: {', '.join(RAMP_UP_STRATEGIES)}")
    start = r.positive_int("start", minimum=1 if strategy == "exponential" else 0)
    end = r.positive_int("end")
    if start > end:
        r.fail(r.key("start"), f"{start} req/s is above end {end}", "ramp up: set start to at most end")
    r.done()
    return RampUp(strategy, start, end)


def _read_request_rate(r: Reader, ramp_up: RampUp | None, inherited: float | None) -> float:
    """``request_rate`` (req/s, .inf for all at once). A ramp sets the rate itself (vLLM refuses a ramp with a
    finite ``--request-rate``), so beside ``ramp_up`` it is refused and inf; a shape without either keeps its
    base's (``inherited``)."""
    if ramp_up is not None:
        if "request_rate" in r.data:
            r.fail(r.key("request_rate"), "set beside ramp_up, which sets the rate", "drop request_rate or ramp_up")
        return math.inf
    rate = r.get("request_rate", float) if inherited is None else r.get("request_rate", float, inherited)
    if not rate > 0:
        r.fail(r.key("request_rate"), f"must be > 0 or .inf, got {rate:g}", "use a positive rate or .inf")
    return rate


def _read_load_shape(r: Reader, spec: BenchSpec) -> BenchSpec:
    """The load-shape keys of ``workloads.bench`` or one of its shapes on top of ``spec`` (a shape's base):
    ``burstiness`` (> 0; 1 is Poisson, below 1 bursts), ``range_ratio`` (in [0, 1), the random dataset's only), and
    with ``dataset: prefix_repetition`` its ``prefix_len``, ``suffix_len`` and ``num_prefixes``, refused on any other
    dataset (vLLM would ignore them without a word)."""
    burstiness = r.get("burstiness", float, spec.burstiness)
    if not 0 < burstiness < math.inf:
        r.fail(
            r.key("burstiness"), f"must be > 0, got {burstiness:g}", "use 1 for Poisson arrivals, below 1 for bursts"
        )
    if burstiness != 1.0 and spec.request_rate == math.inf and spec.ramp_up is None:
        r.fail(
            r.key("burstiness"),
            "shapes the gaps between requests, but request_rate is inf (every request at once)",
            "set a finite request_rate or ramp_up, or drop burstiness",
        )
    range_ratio = r.get("range_ratio", float, spec.range_ratio)
    if not 0 <= range_ratio < 1:
        r.fail(r.key("range_ratio"), f"must be in [0, 1), got {range_ratio:g}", "use e.g. 0.5 for lengths +-50%")
    if range_ratio and spec.dataset != "random":
        r.fail(
            r.key("range_ratio"),
            f"mixes random lengths, but dataset is {spec.dataset}",
            "drop range_ratio (in a shape: 0)",
        )
    prefix = spec.prefix if spec.dataset == PREFIX_REPETITION else None
    keys = ("prefix_len", "suffix_len", "num_prefixes")
    if spec.dataset != PREFIX_REPETITION:
        if given := [k for k in keys if k in r.data]:
            r.fail(r.key(given[0]), f"belongs to dataset {PREFIX_REPETITION}", f"set dataset: {PREFIX_REPETITION}")
    else:
        prefix = PrefixRepetition(
            *(r.positive_int(k, getattr(prefix, k)) if prefix else r.positive_int(k) for k in keys)
        )
        if prefix.num_prefixes > spec.num_prompts:
            r.fail(
                r.key("num_prefixes"),
                f"{prefix.num_prefixes} prefixes for {spec.num_prompts} prompts (vLLM sends num_prompts // "
                "num_prefixes of each)",
                "set num_prefixes to at most num_prompts",
            )
    return dataclasses.replace(spec, burstiness=burstiness, range_ratio=range_ratio, prefix=prefix)


def _read_shapes(r: Reader, base: BenchSpec, margins: dict[str, float]) -> list[tuple[str, BenchSpec]]:
    """``shapes: {name: {...}}``: each case is measured under each named shape after ``workloads.bench``'s own, each
    with its own repetitions, metrics and verdicts. A shape is the base's keys with its own overrides: the load
    shape, the rate or ramp, the prompt count and lengths, the cap, ``warmups`` (default 0: the case is warm from
    the base's), a fixed ``repetitions`` (default the base's min) and ``metrics``."""
    shapes = []
    for name in list(r.data):
        if not isinstance(name, str) or not CASE_ID.fullmatch(name):
            r.fail(
                r.key(str(name)), "a shape's name must be lower-kebab-case", "rename it, e.g. burst or shared-prefix"
            )
        s = r.child(name)
        assert s is not None
        ramp_up = _read_ramp_up(s.child("ramp_up", None)) or (base.ramp_up if "request_rate" not in s.data else None)
        metrics = s.child("metrics", None)
        spec = dataclasses.replace(
            base,
            dataset=s.get("dataset", str, base.dataset),
            input_len=s.positive_int("input_len", base.input_len),
            output_len=s.positive_int("output_len", base.output_len),
            num_prompts=s.positive_int("num_prompts", base.num_prompts),
            request_rate=_read_request_rate(s, ramp_up, base.request_rate),
            ramp_up=ramp_up,
            max_concurrency=s.positive_int("max_concurrency", base.max_concurrency),
            warmups=s.positive_int("warmups", 0, minimum=0),
            repetitions=s.positive_int("repetitions", base.repetitions),
            max_repetitions=0,
            metrics=base.metrics if metrics is None else _read_metric_gates(metrics, margins),
        )
        spec = _read_load_shape(s, spec)
        s.done()
        shapes.append((name, spec))
    return shapes


def _read_alternation(r: Reader, low: int, high: int) -> tuple[str, int]:
    """``alternation: auto | repetitions | blocks`` and ``block_size: N``. An explicit ``blocks`` needs a range with
    room for two blocks a side (the first look comes after the second: one launch a side cannot tell the launch
    from the change); under ``auto`` a pair that does not fit is refused by the plan, saying why."""
    alternation = r.get("alternation", str, "auto")
    if alternation not in ALTERNATIONS:
        r.fail(r.key("alternation"), f"unknown alternation {alternation!r}", f"use one of: {', '.join(ALTERNATIONS)}")
    block_size = r.positive_int("block_size", 0, minimum=0)
    if "block_size" in r.data and block_size == 0:
        r.fail(r.key("block_size"), "must be >= 1, got 0", "set block_size to at least 1, or drop it (the range's min)")
    if alternation == "blocks" and (high <= low or high < low + (block_size or low)):
        r.fail(
            r.key("alternation"),
            f"blocks of {block_size or low} need room for two a side, but repetitions run {low} to {high}",
            f"set repetitions to {{min: {low}, max: {low + (block_size or low)}}} or more",
        )
    return alternation, block_size


def _default_margin(metric: BenchMetric, margins: dict[str, float]) -> float:
    return margins["throughput" if metric.higher_is_better else "latency"]


def _read_metric_gates(r: Reader | None, margins: dict[str, float]) -> tuple[MetricGate, ...]:
    """``metrics: {key: {on_worse: fail|warn|note, margin_pct: N, require: parity, detect_pct: N}}``, a key any of
    BENCH_METRICS (p50 and p90 too); without it the default set, warned when worse."""
    known = {metric.key: metric for metric in BENCH_METRICS}
    if r is None:
        return tuple(MetricGate(metric, "warn", _default_margin(metric, margins)) for metric in DEFAULT_BENCH_METRICS)
    gates = []
    for key in list(r.data):
        if key not in known:
            r.fail(r.key(str(key)), f"unknown metric {key!r}", f"use some of: {', '.join(known)}")
        g = r.child(str(key))
        on_worse = g.get("on_worse", str, "warn")
        if on_worse not in ON_WORSE:
            g.fail(g.key("on_worse"), f"unknown action {on_worse!r}", f"use one of: {', '.join(ON_WORSE)}")
        margin = _positive_pct(g, "margin_pct", g.get("margin_pct", float, _default_margin(known[key], margins)))
        require = g.get("require", str, "")
        if require not in REQUIRES:
            g.fail(g.key("require"), f"unknown requirement {require!r}", "use require: parity, or leave it out")
        detect = g.get("detect_pct", float, None)
        if detect is not None and not detect > 0:
            g.fail(g.key("detect_pct"), f"{detect:g} is not a positive percentage", "use e.g. detect_pct: 5")
        g.done()
        gates.append(MetricGate(known[key], on_worse, margin, require, detect))
    if not gates:
        r.fail(r.path, "lists no metrics", "name at least one metric, or remove metrics for the default set")
    r.done()
    return tuple(gates)


def bench_spec(profile: Profile) -> BenchSpec | None:
    """The profile's ``workloads.bench``, None where it has none: the one typed way to it."""
    spec: BenchSpec | None = profile.workloads.get(NAME)
    return spec
