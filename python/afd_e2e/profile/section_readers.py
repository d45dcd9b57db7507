"""Reading a profile document section by section into the records of ``profile.model``."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from afd_e2e.profile import catalogue, connectors
from afd_e2e.profile.connectors import DEFAULT_CONNECTOR, ConnectorTraits
from afd_e2e.profile.model import (
    CASE_ID,
    INTERCONNECTS,
    MODEL_RUNNER_ENV,
    MODEL_RUNNERS,
    ON_REGRESSION,
    PLATFORMS,
    SCHEMA_VERSION,
    ArgEdit,
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
    ModelSpec,
    PlacementSpec,
    Profile,
    ProfilerSpec,
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
