"""Reading a profile document section by section into the records of ``profile.model``."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

from afd_e2e.profile import catalogue, connectors
from afd_e2e.profile.connectors import DEFAULT_CONNECTOR, ConnectorTraits
from afd_e2e.profile.model import (
    ALTERNATIONS,
    BENCH_METRICS,
    CASE_ID,
    DEFAULT_BENCH_METRICS,
    DEFAULT_MARGIN_PCT,
    GATED_THROUGHPUT,
    INTERCONNECTS,
    MODEL_RUNNER_ENV,
    MODEL_RUNNERS,
    ON_REGRESSION,
    ON_WORSE,
    PLATFORMS,
    PREFIX_REPETITION,
    RAMP_UP_STRATEGIES,
    REQUIRES,
    SCHEMA_VERSION,
    ArgEdit,
    BenchMetric,
    BenchSpec,
    BudgetSpec,
    CaseSpec,
    CheckpointSpec,
    ComparisonSpec,
    DboSpec,
    EngineSpec,
    ExecutionSpec,
    FlightRecorderSpec,
    GateSpec,
    GraphSpec,
    HardwareSpec,
    MetricGate,
    ModelSpec,
    PlacementSpec,
    PrefixRepetition,
    Profile,
    ProfilerSpec,
    RampUp,
    RoleSpec,
    SoftwareSpec,
    TrendSpec,
)
from afd_e2e.profile.reader import Reader
from afd_e2e.profile.rules import check_cross_fields


def _read_checkpoint(r: Reader) -> CheckpointSpec:
    spec = CheckpointSpec(
        architectures=r.str_list("architectures"),
        model_type=r.get("model_type", str),
        num_experts=r.get("num_experts", int, None),
        num_experts_per_tok=r.get("num_experts_per_tok", int, None),
        min_size_gib=r.get("min_size_gib", float, 0.0),
    )
    r.done()
    return spec


def _read_role(r: Reader, *, default_ep: bool) -> RoleSpec:
    role = RoleSpec(
        devices=r.get("devices", str, None),
        dp=r.positive_int("dp"),
        tp=r.positive_int("tp", 1),
        ep=r.get("ep", bool, default_ep),
    )
    r.done()
    return role


def _read_edit(r: Reader, role: str | None) -> ArgEdit | None:
    """One layer of argument/environment changes; None when the mapping changes nothing."""
    edit = ArgEdit(
        role=role,
        add_args=r.str_list("add_args", []),
        remove_args=r.str_list("remove_args", []),
        env_set=r.str_map("env", {}),
        env_remove=r.str_list("remove_env", []),
    )
    _refuse_runner_variable(r, "env", edit.env_set)
    _refuse_runner_variable(r, "remove_env", edit.env_remove)
    for flag in edit.remove_args:
        if not flag.startswith("-") or "=" in flag:
            r.fail(r.key("remove_args"), f"{flag!r} is not a flag name", "name the flag alone, e.g. --enforce-eager")
    if not (edit.add_args or edit.remove_args or edit.env_set or edit.env_remove):
        return None
    return edit


def _refuse_runner_variable(r: Reader, key: str, names: Any) -> None:
    """The model runner has one key, so the plan knows what every child asked and a comparison can hold both sides
    to it: the variable itself, set or removed by hand, is refused with that key."""
    if MODEL_RUNNER_ENV in names:
        r.fail(
            r.key(key),
            f"{MODEL_RUNNER_ENV} is set by the model runner key",
            f"remove it here and set engine.model_runner (or a case's model_runner) to one of {', '.join(MODEL_RUNNERS)}",
        )


def _read_model_runner(r: Reader, default: str | None) -> str | None:
    value = r.get("model_runner", str, default)
    if value is not None and value not in MODEL_RUNNERS:
        r.fail(r.key("model_runner"), f"unknown model runner {value!r}", f"use one of: {', '.join(MODEL_RUNNERS)}")
    return value


def _read_graph(r: Reader) -> GraphSpec:
    spec = GraphSpec(capture_size=r.positive_int("capture_size"))
    r.done()
    return spec


def _read_dbo(r: Reader) -> DboSpec:
    spec = DboSpec(
        decode_token_threshold=r.positive_int("decode_token_threshold", minimum=0),
        prefill_token_threshold=r.positive_int("prefill_token_threshold", minimum=0),
    )
    r.done()
    return spec


def _read_flight_recorder(r: Reader) -> FlightRecorderSpec:
    spec = FlightRecorderSpec(buffer_size=r.positive_int("buffer_size", 2000))
    r.done()
    return spec


def _read_profiler(r: Reader) -> ProfilerSpec:
    # Defaults: an active window of four steps after three (the 12-05 GPU run: wait 0, warmup 1, active 1 traced
    # the first request's prefill alone, wait 2, warmup 1, active 4 four decode steps, which prove graph replay;
    # execution/provable.py), a 100 MiB upload cap.
    spec = ProfilerSpec(
        wait=r.positive_int("wait", 2, minimum=0),
        warmup=r.positive_int("warmup", 1, minimum=0),
        active=r.positive_int("active", 4),
        repeat=r.positive_int("repeat", 1, minimum=0),
        skip_first=r.positive_int("skip_first", 0, minimum=0),
        wait_s=r.get("wait_s", float, 120.0),
        upload_limit_mib=r.get("upload_limit_mib", float, 100.0),
    )
    r.done()
    return spec


def _read_placement(r: Reader, role_names: tuple[str, ...]) -> dict[str, PlacementSpec]:
    """``placement: {<role>: {agents: {queue: ..., gpus: "8"}, interface: eth0, ...}}``: roles on other agent pools."""
    placement = {}
    for role_name in r.data:
        if role_name not in role_names:
            r.fail(
                r.key(str(role_name)), f"no role {role_name!r} in this case", f"place one of: {', '.join(role_names)}"
            )
        p = r.child(str(role_name))
        if "agents" not in p.data:
            p.fail(p.key("agents"), "missing", 'name the pool\'s agent tags, e.g. agents: {queue: gpu-8, gpus: "8"}')
        agents = p.str_map("agents")
        if not agents:
            p.fail(p.key("agents"), "names no agent tags", 'name the pool\'s tags, e.g. {queue: gpu-8, gpus: "8"}')
        devices = p.get("devices", list, [])
        if any(not isinstance(d, int) or isinstance(d, bool) or d < 0 for d in devices) or len(set(devices)) != len(
            devices
        ):
            p.fail(p.key("devices"), f"must be unique device ids on that agent, got {devices!r}", "write e.g. [0, 1]")
        placement[str(role_name)] = PlacementSpec(
            agents=agents,
            interface=p.get("interface", str, fix="name the pool's network interface, e.g. interface: eth0"),
            listen=p.get("listen", str, None),
            devices=tuple(devices),
            nodes=p.positive_int("nodes", 1),
        )
        p.done()
    r.done()
    return placement


def _option(r: Reader, name: str, read: Any, inherited: Any) -> Any:
    """A case option: absent keeps the parent's, ``null`` turns it off, a mapping replaces it."""
    if name not in r.data:
        r.seen.add(name)
        return inherited
    value = r.get(name, (dict, type(None)))
    return None if value is None else read(Reader(r.source, value, r.key(name)))


def _variant_order(c: Reader) -> list[str]:
    """Case ids with every parent before its variants; a missing parent or a cycle is a one-line error."""
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(case_id: str, chain: list[str]) -> None:
        if state.get(case_id) == "done":
            return
        if state.get(case_id) == "visiting":
            cycle = " -> ".join([*chain[chain.index(case_id) :], case_id])
            c.fail(f"cases.{case_id}.extends", f"variants form a cycle: {cycle}", "make one of them a plain case")
        state[case_id] = "visiting"
        body = c.data[case_id]
        parent = body.get("extends") if isinstance(body, dict) else None
        if parent is not None:
            if not isinstance(parent, str) or parent not in c.data:
                c.fail(
                    f"cases.{case_id}.extends",
                    f"unknown case {parent!r}",
                    f"extend one of: {', '.join(str(k) for k in c.data if k != case_id)}",
                )
            visit(parent, [*chain, case_id])
        state[case_id] = "done"
        order.append(case_id)

    for case_id in c.data:
        visit(case_id, [])
    return order


def _read_cases(c: Reader, declared: Mapping[str, ConnectorTraits], plugin_rules: str) -> tuple[CaseSpec, ...]:
    """Every case, variants folded onto their parents, in the order the profile lists them; ``declared``: the
    profile's own connector traits (``connectors:``); ``plugin_rules``: the plugin whose topology rules apply
    (``software.afd_plugin_rules``)."""
    for case_id in c.data:
        _check_case_id(c, str(case_id))
    resolved: dict[str, CaseSpec] = {}
    for case_id in _variant_order(c):
        r = c.child(str(case_id))
        parent_id = r.get("extends", str, None)
        parent = resolved[parent_id] if parent_id else None
        resolved[case_id] = _read_case(r, str(case_id), parent, declared, plugin_rules)
    c.done()
    return tuple(resolved[case_id] for case_id in c.data)


def _check_case_id(c: Reader, case_id: str) -> None:
    """Case ids are stable lower-kebab-case names (the AFD plugin's e2e invariant 001): they are step keys, block
    options, meta-data keys, file names and trend history keys, where case or underscores would split one case's
    history or break a key."""
    if not CASE_ID.fullmatch(case_id):
        suggested = "-".join(re.findall(r"[a-z0-9]+", case_id.lower())) or "case-1"
        c.fail(c.key(case_id), f"case id {case_id!r} is not lower-kebab-case", f"rename it to {suggested}")


def _read_case(
    r: Reader, case_id: str, parent: CaseSpec | None, declared: Mapping[str, ConnectorTraits], plugin_rules: str
) -> CaseSpec:
    if parent is None:
        kind = r.get("kind", str)
        if kind not in ("native", "afd"):
            r.fail(r.key("kind"), f"unknown case kind {kind!r}", "use native or afd")
    else:
        kind = parent.kind
        if "kind" in r.data and r.data["kind"] != kind:
            r.fail(r.key("kind"), f"a variant keeps the kind of {parent.id} ({kind})", "remove kind")
        r.seen.add("kind")
    phases = r.str_list("phases") if parent is None else r.str_list("phases", list(parent.phases))
    known = catalogue.phase_names()
    for phase in phases:
        if phase not in known:
            r.fail(r.key("phases"), f"unknown phase {phase!r}", f"use some of: {', '.join(known)}")
    native = parent.native if parent else None
    attention, ffn = (parent.attention, parent.ffn) if parent else (None, None)
    connector = parent.connector if parent else None
    traits, extra_config = (parent.connector_traits, parent.connector_extra_config) if parent else (None, {})
    if kind == "native":
        if parent is None or "topology" in r.data:
            native = _read_role(r.child("topology"), default_ep=False)
    else:
        if parent is None or "attention" in r.data:
            attention = _read_role(r.child("attention"), default_ep=True)
        if parent is None or "ffn" in r.data:
            ffn = _read_role(r.child("ffn"), default_ep=True)
        connector = r.get("connector", str, connector or DEFAULT_CONNECTOR)
        traits = connectors.resolve_connector(r, connector, declared)
        extra_config = r.get("connector_extra_config", dict, extra_config)
        connectors.check_extra_config(r, connector, traits, extra_config)
        assert attention and ffn
        connectors.check_topology(r, case_id, connector, traits, plugin_rules, attention.ranks, ffn.ranks)
    edits = list(parent.edits) if parent else []
    if (own := _read_edit(r, None)) is not None:
        edits.append(own)
    role_names = ("server",) if kind == "native" else ("attention", "ffn")
    if (roles := r.child("roles", None)) is not None:
        for role_name in roles.data:
            if role_name not in role_names:
                roles.fail(roles.key(str(role_name)), f"no role {role_name!r} in a {kind} case", f"use {role_names}")
            role_reader = roles.child(str(role_name))
            if (edit := _read_edit(role_reader, str(role_name))) is not None:
                edits.append(edit)
            role_reader.done()
        roles.done()
    case = CaseSpec(
        id=case_id,
        kind=kind,
        description=r.get("description", str, parent.description if parent else ""),
        phases=phases,
        native=native,
        attention=attention,
        ffn=ffn,
        connector=connector,
        edits=tuple(edits),
        graph=_option(r, "graph", _read_graph, parent.graph if parent else None),
        dbo=_option(r, "dbo", _read_dbo, parent.dbo if parent else None),
        profiler=_option(r, "profiler", _read_profiler, parent.profiler if parent else None),
        nccl_flight_recorder=_option(
            r, "nccl_flight_recorder", _read_flight_recorder, parent.nccl_flight_recorder if parent else None
        ),
        extends=parent.id if parent else None,
        placement=_option(
            r, "placement", lambda p: _read_placement(p, role_names), parent.placement if parent else None
        )
        or {},
        model_runner=_read_model_runner(r, parent.model_runner if parent else None),
        connector_traits=traits,
        connector_extra_config=extra_config,
    )
    r.done()
    return case


STARTUP_STALL_CHOICES = ("fail", "wait")

# Keys that became budgets (``budgets:``), refused with the fix so an old profile fails with one clear line.
MOVED_TO_BUDGETS = {
    "engine.startup_timeout_s": "startup_s",
    "engine.teardown_grace_s": "teardown_s",
    "workloads.bench.timeout_s": "bench_repetition_s",
}


def _refuse_moved_keys(r: Reader) -> None:
    for old, new in MOVED_TO_BUDGETS.items():
        section, _, name = old.rpartition(".")
        if section == r.path and name in r.data:
            r.fail(old, f"moved to budgets.{new}", f"replace it with `budgets: {{{new}: {r.data[name]}}}`")


def _read_budgets(r: Reader) -> BudgetSpec:
    def seconds(name: str, default: float) -> float:
        value = r.get(name, float, default)
        if value <= 0:
            r.fail(r.key(name), f"must be > 0 seconds, got {value:g}", f"set {name} to a positive number of seconds")
        return value

    budgets = BudgetSpec(
        startup_s=seconds("startup_s", 1800.0),
        teardown_s=seconds("teardown_s", 20.0),
        request_s=seconds("request_s", 600.0),
        rendezvous_s=seconds("rendezvous_s", BudgetSpec.rendezvous_s),
        heartbeat_lost_s=seconds("heartbeat_lost_s", BudgetSpec.heartbeat_lost_s),
        phases={key: seconds(key, default) for key, default in catalogue.budget_keys().items()},
        drain_s=r.get("drain_s", int, None),
    )
    if budgets.drain_s is not None and not 0 <= budgets.drain_s < budgets.teardown_s:
        r.fail(
            r.key("drain_s"),
            f"must be whole seconds from 0 to below teardown_s ({budgets.teardown_s:g}), got {budgets.drain_s}",
            "leave vLLM's shutdown the rest of the teardown budget: e.g. drain_s: 1 with teardown_s: 10",
        )
    r.done()
    return budgets


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


def _read_bench(r: Reader, budgets: BudgetSpec) -> BenchSpec:
    _refuse_moved_keys(r)
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
        timeout_s=budgets.bench_repetition_s,
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


def _read_trend(r: Reader) -> TrendSpec:
    spec = TrendSpec(
        window=r.positive_int("window", TrendSpec.window, minimum=3),
        threshold_pct=r.get("threshold_pct", float, TrendSpec.threshold_pct),
        on_regression=r.get("on_regression", str, TrendSpec.on_regression),
        materiality_sigma=r.get("materiality_sigma", float, TrendSpec.materiality_sigma),
        materiality_pct=r.get("materiality_pct", float, TrendSpec.materiality_pct),
        bisect=r.get("bisect", str, TrendSpec.bisect),
    )
    if spec.bisect not in ("block", "unattended"):
        r.fail(r.key("bisect"), f"unknown value {spec.bisect!r}", "use block or unattended")
    for key in ("materiality_sigma", "materiality_pct"):
        if getattr(spec, key) < 0:
            r.fail(r.key(key), f"{getattr(spec, key):g} is negative", f"use a number >= 0 for {key}")
    if spec.on_regression not in ON_REGRESSION:
        r.fail(r.key("on_regression"), f"unknown value {spec.on_regression!r}", "use warn or fail")
    if spec.threshold_pct < 0:
        r.fail(r.key("threshold_pct"), f"{spec.threshold_pct:g} is negative", "use a percentage >= 0, e.g. 1")
    r.done()
    return spec


def _read_execution(r: Reader) -> ExecutionSpec:
    spec = ExecutionSpec(require_proof=r.get("require_proof", bool, None))
    r.done()
    return spec


def _parse_slice(r: Reader, name: str, value: Any, count: int) -> tuple[int, int]:
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value)):
        r.fail(r.key(name), f"must be [start, end] indices into the device list, got {value!r}", "write e.g. [0, 4]")
    start, end = value
    if not 0 <= start < end <= count:
        r.fail(r.key(name), f"slice [{start}, {end}] does not fit {count} devices", f"use 0 <= start < end <= {count}")
    return (start, end)


def parse_profile(data: Any, source: str) -> Profile:
    """Validate a profile document; raise UsageError naming the file, key and fix on the first problem."""
    r = Reader(source, data, "")
    schema = r.get("schema", int)
    if schema != SCHEMA_VERSION:
        r.fail("schema", f"unsupported profile schema {schema}", f"set schema: {SCHEMA_VERSION}")
    name = r.get("name", str)
    platform = r.get("platform", str)
    if platform not in PLATFORMS:
        r.fail("platform", f"unknown platform {platform!r}", f"use one of: {', '.join(PLATFORMS)}")

    m = r.child("model")
    model = ModelSpec(served_name=m.get("served_name", str), checkpoint=_read_checkpoint(m.child("checkpoint")))
    m.done()

    h = r.child("hardware")
    hardware = HardwareSpec(
        gpus=h.positive_int("gpus", minimum=0),
        min_memory_mib=h.positive_int("min_memory_mib", 0, minimum=0),
        interconnects=h.str_list("interconnects", list(INTERCONNECTS)),
        require_nvlink_between_roles=h.get("require_nvlink_between_roles", bool, False),
        min_driver=h.get("min_driver", str, None),
        min_cuda=h.get("min_cuda", str, None),
        gpu_models=h.str_list("gpu_models", []),
    )
    for ic in hardware.interconnects:
        if ic not in INTERCONNECTS:
            h.fail(h.key("interconnects"), f"unknown interconnect {ic!r}", f"use some of: {', '.join(INTERCONNECTS)}")
    h.done()

    s = r.child("software", {})
    software = SoftwareSpec(
        vllm_version=s.get("vllm_version", str, None),
        afd_plugin=s.get("afd_plugin", bool, False),
        afd_plugin_rules=s.get("afd_plugin_rules", str, connectors.CURRENT_RULES),
    )
    if software.afd_plugin_rules not in connectors.PLUGIN_RULES:
        s.fail(
            s.key("afd_plugin_rules"),
            f"unknown AFD plugin rules {software.afd_plugin_rules!r}",
            f"use one of: {', '.join(connectors.PLUGIN_RULES)}",
        )
    s.done()

    g = r.child("gates")
    gates = GateSpec(
        backend=g.get("backend", str),
        large_model=g.get("large_model", bool, False),
        model_env=g.get("model_env", str),
        devices_env=g.get("devices_env", str, None),
    )
    g.done()

    d = r.child("devices")
    device_count = d.positive_int("count", minimum=0)
    default_devices = tuple(d.get("default", list, []))
    raw_groups = d.get("groups", dict, {})
    groups = {str(k): _parse_slice(d, f"groups.{k}", v, device_count) for k, v in raw_groups.items()}
    d.done()
    if device_count != hardware.gpus:
        r.fail("devices.count", f"{device_count} differs from hardware.gpus {hardware.gpus}", "make them equal")
    if default_devices and len(default_devices) != device_count:
        r.fail("devices.default", f"lists {len(default_devices)} devices, count is {device_count}", "list count ids")

    budgets = _read_budgets(r.child("budgets", {}))

    e = r.child("engine")
    _refuse_moved_keys(e)
    env = e.child("env", {})
    engine = EngineSpec(
        executable=e.get("executable", str, "vllm"),
        host=e.get("host", str, "127.0.0.1"),
        port_base=e.positive_int("port_base", minimum=1024),
        port_stride=e.positive_int("port_stride", 20, minimum=4),
        serve_args=e.str_list("serve_args", []),
        env_set=env.str_map("set", {}),
        env_strip=env.str_list("strip", []),
        ready_path=e.get("ready_path", str, "/v1/models"),
        interface=e.get("interface", str, None),
        on_startup_stall=e.get("on_startup_stall", str, "wait"),
        model_runner=_read_model_runner(e, EngineSpec.model_runner) or EngineSpec.model_runner,
    )
    _refuse_runner_variable(env, "set", engine.env_set)
    _refuse_runner_variable(env, "strip", engine.env_strip)
    if engine.on_startup_stall not in STARTUP_STALL_CHOICES:
        e.fail(
            e.key("on_startup_stall"),
            f"must be one of {', '.join(STARTUP_STALL_CHOICES)}, got {engine.on_startup_stall!r}",
            "set on_startup_stall to fail or wait",
        )
    env.done()
    e.done()

    declared = connectors.read_declared(r.child("connectors", {}))
    cases = _read_cases(r.child("cases"), declared, software.afd_plugin_rules)
    if not cases:
        r.fail("cases", "no cases", "declare at least one case")

    w = r.child("workloads")
    bench = _read_bench(br, budgets) if (br := w.child("bench", None)) is not None else None
    extra = [
        (workload, wr) for workload in catalogue.extra_workloads() if (wr := w.child(workload.key, None)) is not None
    ]
    w.done()

    comparisons = []
    raw_cmp = r.get("comparisons", dict, {})
    for cmp_id, body in raw_cmp.items():
        cr = Reader(source, body, f"comparisons.{cmp_id}")
        comparisons.append(
            ComparisonSpec(
                id=str(cmp_id),
                baseline=cr.get("baseline", str),
                candidate=cr.get("candidate", str),
                measures=cr.str_list("measures"),
            )
        )
        cr.done()

    profile = Profile(
        name=name,
        description=r.get("description", str, ""),
        source=source,
        platform=platform,
        smoke_only=r.get("smoke_only", bool, False),
        model=model,
        hardware=hardware,
        software=software,
        agent_tags=r.str_map("agent_tags", {}),
        gates=gates,
        device_count=device_count,
        default_devices=default_devices,
        device_groups=groups,
        engine=engine,
        cases=cases,
        bench=bench,
        comparisons=tuple(comparisons),
        budgets=budgets,
        trend=_read_trend(r.child("trend", {})),
        execution=_read_execution(r.child("execution", {})),
    )
    for workload, wr in extra:  # in the order registered: a reader sees the sections read before its own
        if workload.read is not None:
            read = {**profile.workloads, workload.key: workload.read(wr, profile)}
            profile = dataclasses.replace(profile, workloads=read)
    r.done()
    check_cross_fields(profile)
    return profile
