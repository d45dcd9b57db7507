"""Profiles: what a model, its hardware, its cases and workloads are, loaded from YAML and validated.

A profile is the only place a model or topology is described; everything else (gates, plans, preflight,
pipeline steps, reports) is derived from it. Validation errors are one line naming the file, the key and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from afd_e2e.errors import UsageError

SCHEMA_VERSION = 1
PHASES = ("smoke", "correctness", "performance")
INTERCONNECTS = ("nvlink", "pcie")
PLATFORMS = ("cuda", "cpu")


@dataclass(frozen=True)
class CheckpointSpec:
    """What the checkpoint's config.json must declare (top level or under ``text_config``)."""

    architectures: tuple[str, ...]
    model_type: str
    num_experts: int | None
    num_experts_per_tok: int | None
    min_size_gib: float


@dataclass(frozen=True)
class ModelSpec:
    served_name: str
    checkpoint: CheckpointSpec


@dataclass(frozen=True)
class HardwareSpec:
    gpus: int
    min_memory_mib: int
    interconnects: tuple[str, ...]
    require_nvlink_between_roles: bool
    min_driver: str | None
    min_cuda: str | None
    gpu_models: tuple[str, ...]


@dataclass(frozen=True)
class SoftwareSpec:
    vllm_version: str | None
    afd_plugin: bool


@dataclass(frozen=True)
class GateSpec:
    """Environment variables that must opt in before this profile may run."""

    backend: str
    large_model: bool
    model_env: str
    devices_env: str | None


@dataclass(frozen=True)
class EngineSpec:
    executable: str
    host: str
    port_base: int
    port_stride: int
    serve_args: tuple[str, ...]
    env_set: Mapping[str, str]
    env_strip: tuple[str, ...]
    ready_path: str
    startup_timeout_s: float
    teardown_grace_s: float


@dataclass(frozen=True)
class RoleSpec:
    """One vLLM serve process's topology: a device group, DP and TP sizes, expert parallel."""

    devices: str | None
    dp: int
    tp: int
    ep: bool

    @property
    def ranks(self) -> int:
        return self.dp * self.tp


@dataclass(frozen=True)
class CaseSpec:
    id: str
    kind: str  # "native" | "afd"
    description: str
    phases: tuple[str, ...]
    native: RoleSpec | None
    attention: RoleSpec | None
    ffn: RoleSpec | None
    connector: str | None
    extra_args: tuple[str, ...]
    env_set: Mapping[str, str]

    @property
    def label(self) -> str:
        """Human label, e.g. ``native DP4/TP1/EP4`` or ``AFD 4A4F``."""
        if self.kind == "afd":
            assert self.attention and self.ffn
            return f"AFD {self.attention.ranks}A{self.ffn.ranks}F"
        assert self.native
        ep = f"/EP{self.native.ranks}" if self.native.ep else ""
        return f"native DP{self.native.dp}/TP{self.native.tp}{ep}"

    def roles(self) -> dict[str, RoleSpec]:
        if self.kind == "afd":
            assert self.attention and self.ffn
            return {"ffn": self.ffn, "attention": self.attention}
        assert self.native
        return {"server": self.native}


@dataclass(frozen=True)
class SmokeSpec:
    prompt: str
    max_tokens: int


@dataclass(frozen=True)
class Gsm8kSpec:
    questions: int
    shots: int
    max_tokens: int
    concurrency: int
    min_correct: int
    dataset_env: str
    accuracy_meaningful: bool


@dataclass(frozen=True)
class ParitySpec:
    prompts: tuple[str, ...]
    max_tokens: int
    min_identical_share: float


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
    repetitions: int
    parity_threshold_pct: float
    timeout_s: float


@dataclass(frozen=True)
class ComparisonSpec:
    id: str
    baseline: str
    candidate: str
    measures: tuple[str, ...]  # subset of ("parity", "performance")


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    source: str
    platform: str
    smoke_only: bool
    model: ModelSpec
    hardware: HardwareSpec
    software: SoftwareSpec
    agent_tags: Mapping[str, str]
    gates: GateSpec
    device_count: int
    default_devices: tuple[int, ...]
    device_groups: Mapping[str, tuple[int, int]]
    engine: EngineSpec
    cases: tuple[CaseSpec, ...]
    smoke: SmokeSpec
    gsm8k: Gsm8kSpec | None
    parity: ParitySpec | None
    bench: BenchSpec | None
    comparisons: tuple[ComparisonSpec, ...]
    extra: Mapping[str, Any] = field(default_factory=dict)

    def case(self, case_id: str) -> CaseSpec:
        for case in self.cases:
            if case.id == case_id:
                return case
        known = ", ".join(c.id for c in self.cases)
        raise UsageError(f"profile {self.name} has no case {case_id!r}", f"use one of: {known}")


# --------------------------------------------------------------------------- reading helpers


class _Reader:
    """Walks a YAML mapping, type-checking each key and rejecting unknown ones, with file:key context."""

    def __init__(self, source: str, data: Any, path: str) -> None:
        self.source = source
        self.path = path
        if not isinstance(data, Mapping):
            self.fail(path or "(top level)", f"must be a mapping, got {type(data).__name__}", "write key: value pairs")
        self.data = data
        self.seen: set[str] = set()

    def fail(self, key: str, problem: str, fix: str) -> None:
        raise UsageError(f"{self.source}: {key}: {problem}", fix)

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def get(self, name: str, kind: type | tuple[type, ...], default: Any = ..., *, fix: str = "") -> Any:
        self.seen.add(name)
        if name not in self.data:
            if default is ...:
                self.fail(self.key(name), "missing", fix or f"add {name}")
            return default
        value = self.data[name]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds:
            self.fail(self.key(name), f"must be {_kind_names(kinds)}, got a boolean", fix or "use a number or string")
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kinds):
            self.fail(
                self.key(name),
                f"must be {_kind_names(kinds)}, got {type(value).__name__} {value!r}",
                fix or f"set {name} to a {_kind_names(kinds)}",
            )
        return value

    def positive_int(self, name: str, default: Any = ..., *, minimum: int = 1) -> int:
        value = self.get(name, int, default)
        if value < minimum:
            self.fail(self.key(name), f"must be >= {minimum}, got {value}", f"set {name} to at least {minimum}")
        return value

    def str_list(self, name: str, default: Any = ...) -> tuple[str, ...]:
        value = self.get(name, list, default)
        for item in value:
            if not isinstance(item, str):
                self.fail(self.key(name), f"items must be strings, got {item!r}", "quote every item")
        return tuple(value)

    def str_map(self, name: str, default: Any = ...) -> dict[str, str]:
        value = self.get(name, dict, default)
        out = {}
        for k, v in value.items():
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                self.fail(f"{self.key(name)}.{k}", f"must be a string, got {v!r}", "quote the value")
            out[str(k)] = str(v)
        return out

    def child(self, name: str, default: Any = ...) -> _Reader | None:
        value = self.get(name, dict, default)
        if value is None:
            return None
        return _Reader(self.source, value, self.key(name))

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.seen)
        if unknown:
            where = self.path or "top level"
            allowed = ", ".join(sorted(self.seen))
            self.fail(self.key(str(unknown[0])), f"unknown key at {where}", f"remove it or use one of: {allowed}")


def _kind_names(kinds: tuple[type, ...]) -> str:
    names = {
        int: "an integer",
        float: "a number",
        str: "a string",
        bool: "true/false",
        list: "a list",
        dict: "a mapping",
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds)


# --------------------------------------------------------------------------- sections


def _read_checkpoint(r: _Reader) -> CheckpointSpec:
    spec = CheckpointSpec(
        architectures=r.str_list("architectures"),
        model_type=r.get("model_type", str),
        num_experts=r.get("num_experts", int, None),
        num_experts_per_tok=r.get("num_experts_per_tok", int, None),
        min_size_gib=r.get("min_size_gib", float, 0.0),
    )
    r.done()
    return spec


def _read_role(r: _Reader, *, default_ep: bool) -> RoleSpec:
    role = RoleSpec(
        devices=r.get("devices", str, None),
        dp=r.positive_int("dp"),
        tp=r.positive_int("tp", 1),
        ep=r.get("ep", bool, default_ep),
    )
    r.done()
    return role


def _read_case(r: _Reader, case_id: str) -> CaseSpec:
    kind = r.get("kind", str)
    if kind not in ("native", "afd"):
        r.fail(r.key("kind"), f"unknown case kind {kind!r}", "use native or afd")
    phases = r.str_list("phases")
    for phase in phases:
        if phase not in PHASES:
            r.fail(r.key("phases"), f"unknown phase {phase!r}", f"use some of: {', '.join(PHASES)}")
    native = attention = ffn = None
    connector = None
    if kind == "native":
        native = _read_role(r.child("topology"), default_ep=False)
    else:
        attention = _read_role(r.child("attention"), default_ep=True)
        ffn = _read_role(r.child("ffn"), default_ep=True)
        connector = r.get("connector", str, "P2pNcclAFDConnector")
        if attention.tp != 1 or ffn.tp != 1:
            r.fail(r.key("attention.tp"), "AFD XAYF runs both roles with TP=1", "set tp: 1 for attention and ffn")
        x, y = attention.ranks, ffn.ranks
        if x < y or x % y:
            r.fail(
                r.key("attention.dp"),
                f"impossible AFD topology {x}A{y}F: the connector needs X >= Y and X % Y == 0",
                "make the Attention DP a multiple of the FFN DP",
            )
    case = CaseSpec(
        id=case_id,
        kind=kind,
        description=r.get("description", str, ""),
        phases=phases,
        native=native,
        attention=attention,
        ffn=ffn,
        connector=connector,
        extra_args=r.str_list("extra_args", []),
        env_set=r.str_map("env", {}),
    )
    r.done()
    return case


def _read_bench(r: _Reader) -> BenchSpec:
    spec = BenchSpec(
        dataset=r.get("dataset", str, "random"),
        input_len=r.positive_int("input_len"),
        output_len=r.positive_int("output_len"),
        num_prompts=r.positive_int("num_prompts"),
        request_rate=r.get("request_rate", float),
        max_concurrency=r.positive_int("max_concurrency"),
        temperature=r.get("temperature", float, 0.0),
        seed=r.get("seed", int, 0),
        warmups=r.positive_int("warmups", 1, minimum=0),
        repetitions=r.positive_int("repetitions"),
        parity_threshold_pct=r.get("parity_threshold_pct", float, 2.0),
        timeout_s=r.get("timeout_s", float, 3600.0),
    )
    r.done()
    return spec


def _parse_slice(r: _Reader, name: str, value: Any, count: int) -> tuple[int, int]:
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value)):
        r.fail(r.key(name), f"must be [start, end] indices into the device list, got {value!r}", "write e.g. [0, 4]")
    start, end = value
    if not 0 <= start < end <= count:
        r.fail(r.key(name), f"slice [{start}, {end}] does not fit {count} devices", f"use 0 <= start < end <= {count}")
    return (start, end)


def parse_profile(data: Any, source: str) -> Profile:
    """Validate a profile document; raise UsageError naming the file, key and fix on the first problem."""
    r = _Reader(source, data, "")
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
    software = SoftwareSpec(vllm_version=s.get("vllm_version", str, None), afd_plugin=s.get("afd_plugin", bool, False))
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

    e = r.child("engine")
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
        startup_timeout_s=e.get("startup_timeout_s", float, 1800.0),
        teardown_grace_s=e.get("teardown_grace_s", float, 20.0),
    )
    env.done()
    e.done()

    c = r.child("cases")
    cases = tuple(_read_case(c.child(str(case_id)), str(case_id)) for case_id in list(c.data))
    c.done()
    if not cases:
        r.fail("cases", "no cases", "declare at least one case")

    w = r.child("workloads")
    sm = w.child("smoke", {"prompt": "The capital of France is", "max_tokens": 16})
    smoke = SmokeSpec(prompt=sm.get("prompt", str), max_tokens=sm.positive_int("max_tokens"))
    sm.done()
    gsm8k = None
    if (gr := w.child("gsm8k", None)) is not None:
        gsm8k = Gsm8kSpec(
            questions=gr.positive_int("questions"),
            shots=gr.positive_int("shots", minimum=0),
            max_tokens=gr.positive_int("max_tokens"),
            concurrency=gr.positive_int("concurrency", 1),
            min_correct=gr.positive_int("min_correct", minimum=0),
            dataset_env=gr.get("dataset_env", str, "AFD_E2E_GSM8K_DIR"),
            accuracy_meaningful=gr.get("accuracy_meaningful", bool, True),
        )
        if gsm8k.min_correct > gsm8k.questions:
            gr.fail(gr.key("min_correct"), f"{gsm8k.min_correct} > questions {gsm8k.questions}", "lower min_correct")
        gr.done()
    parity = None
    if (pr := w.child("parity", None)) is not None:
        parity = ParitySpec(
            prompts=pr.str_list("prompts"),
            max_tokens=pr.positive_int("max_tokens"),
            min_identical_share=pr.get("min_identical_share", float, 1.0),
        )
        pr.done()
    bench = _read_bench(br) if (br := w.child("bench", None)) is not None else None
    w.done()

    comparisons = []
    raw_cmp = r.get("comparisons", dict, {})
    for cmp_id, body in raw_cmp.items():
        cr = _Reader(source, body, f"comparisons.{cmp_id}")
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
        smoke=smoke,
        gsm8k=gsm8k,
        parity=parity,
        bench=bench,
        comparisons=tuple(comparisons),
    )
    r.done()
    _check_topology(profile)
    return profile


def _check_topology(p: Profile) -> None:
    """Cross-field checks: device groups fit the cases, phases have workloads, comparisons name cases."""

    def fail(key: str, problem: str, fix: str) -> None:
        raise UsageError(f"{p.source}: {key}: {problem}", fix)

    case_ids = {c.id for c in p.cases}
    for case in p.cases:
        for role_name, role in case.roles().items():
            key = f"cases.{case.id}.{'topology' if role_name == 'server' else role_name}"
            if p.platform == "cpu":
                if role.devices is not None:
                    fail(f"{key}.devices", "a cpu profile has no devices", "remove devices")
                if role.dp != 1 or role.ep:
                    fail(key, "DP and EP fail on vLLM's CPU backend", "use dp: 1 and ep: false; compare TP sizes")
                continue
            if role.devices is None:
                fail(f"{key}.devices", "missing", f"name a device group: {', '.join(p.device_groups)}")
            if role.devices not in p.device_groups:
                fail(
                    f"{key}.devices",
                    f"unknown device group {role.devices!r}",
                    f"use one of: {', '.join(p.device_groups)}",
                )
            start, end = p.device_groups[role.devices]
            if end - start != role.ranks:
                fail(
                    key,
                    f"DP{role.dp} x TP{role.tp} = {role.ranks} ranks but group {role.devices!r} has {end - start} devices",
                    "make the group size equal dp * tp",
                )
        if case.kind == "afd":
            a, f = p.device_groups.get(case.attention.devices or ""), p.device_groups.get(case.ffn.devices or "")
            if a and f and max(a[0], f[0]) < min(a[1], f[1]):
                fail(f"cases.{case.id}", "attention and ffn device groups overlap", "give the roles disjoint groups")
        for phase in case.phases:
            if phase == "correctness" and p.gsm8k is None and p.parity is None:
                fail(f"cases.{case.id}.phases", "correctness phase without workloads.gsm8k or parity", "add one")
            if phase == "performance" and p.bench is None:
                fail(f"cases.{case.id}.phases", "performance phase without workloads.bench", "add workloads.bench")
    for cmp in p.comparisons:
        for side in ("baseline", "candidate"):
            if getattr(cmp, side) not in case_ids:
                fail(
                    f"comparisons.{cmp.id}.{side}",
                    f"unknown case {getattr(cmp, side)!r}",
                    f"use one of: {', '.join(sorted(case_ids))}",
                )
        for measure in cmp.measures:
            if measure not in ("parity", "performance"):
                fail(f"comparisons.{cmp.id}.measures", f"unknown measure {measure!r}", "use parity and/or performance")
            phase = "correctness" if measure == "parity" else "performance"
            for side in (cmp.baseline, cmp.candidate):
                if phase not in p.case(side).phases:
                    fail(
                        f"comparisons.{cmp.id}",
                        f"case {side} does not run the {phase} phase",
                        f"add {phase} to its phases",
                    )
        if "parity" in cmp.measures and p.parity is None:
            fail(f"comparisons.{cmp.id}", "parity measure without workloads.parity", "add workloads.parity")


# --------------------------------------------------------------------------- loading


def _builtin_dir() -> Path:
    return Path(str(resources.files("afd_e2e") / "profiles"))


def builtin_profiles() -> list[str]:
    """Names of the profiles shipped inside the package."""
    return sorted(p.stem for p in _builtin_dir().glob("*.yaml"))


def load_profile(name_or_path: str) -> Profile:
    """Load a shipped profile by name, or any profile file by path."""
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml") and path.exists()):
        path = _builtin_dir() / f"{name_or_path}.yaml"
        if not path.exists():
            raise UsageError(
                f"unknown profile {name_or_path!r}",
                f"use one of: {', '.join(builtin_profiles())}, or a path to a .yaml profile",
            )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"{path}: cannot read profile: {first}", "fix the YAML syntax") from exc
    return parse_profile(data, str(path) if path.parent != _builtin_dir() else path.name)
