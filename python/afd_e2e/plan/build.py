"""The pure function profile + devices + model path + port base -> RunPlan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from afd_e2e.errors import UsageError
from afd_e2e.plan.addresses import LEADER, LISTEN_HOST, placeholder, rendezvous_key, rendezvous_variable
from afd_e2e.plan.model import CasePlan, ComparisonPlan, ProcessPlacement, ProcessPlan, RunPlan
from afd_e2e.plan.routing_control import control_label, routing_controls
from afd_e2e.plan.series import plan_series
from afd_e2e.plan.serve_argv import (
    DpSpan,
    child_env,
    flight_recorder_dump_env,
    profiler_dir_env,
    removed_env,
    serve_argv,
)
from afd_e2e.profile import CaseSpec, PlacementSpec, Profile


@dataclass(frozen=True)
class _Slot:
    """One process to plan: a role, or one agent's share of a role spanning agents."""

    role_name: str
    node: int
    placement: PlacementSpec | None

    @property
    def name(self) -> str:
        return self.role_name if self.node == 0 else f"{self.role_name}-node{self.node}"

    @property
    def agent(self) -> str:
        """Each placed process is a follower job of its own; everything else shares the leader's agent."""
        return LEADER if self.placement is None else self.name


def _slots(case: CaseSpec) -> list[_Slot]:
    """Launch order: the roles as the case's connector orders them (``CaseSpec.roles``: the role whose rank 0
    hosts the connector's rendezvous first), node 0 first."""
    slots = []
    for role_name in case.roles():
        placement = case.placement.get(role_name)
        slots += [_Slot(role_name, node, placement) for node in range(placement.nodes if placement else 1)]
    return slots


def _case_processes(
    profile: Profile, case: CaseSpec, devices: tuple[int, ...], model_path: str, block: int, vllm_version: str | None
) -> tuple[tuple[ProcessPlan, ...], dict[str, str]]:
    """The case's processes in launch order, and the rendezvous addresses they need (placeholder -> meta-data key)."""
    processes = []
    roles = case.roles()
    slots = _slots(case)
    connector_ports: tuple[int, ...] = ()
    next_port = block + 2
    if case.kind == "afd":
        assert case.ffn
        connector_ports = tuple(range(block + 2, block + 2 + case.ffn.ranks + 1))
        next_port = connector_ports[-1] + 1
    rpc_ports = {}
    for role_name, placement in case.placement.items():
        if placement.nodes > 1:
            rpc_ports[role_name], next_port = next_port, next_port + 1
    rendezvous: dict[str, str] = {}

    def listen(slot: _Slot) -> str:
        if slot.placement is not None:
            return slot.placement.listen or placeholder(LISTEN_HOST)
        return placeholder(LISTEN_HOST) if case.multi_agent else profile.engine.host

    def address(target: _Slot, seen_from: _Slot) -> str:
        """Where ``seen_from``'s process reaches ``target``'s: its listen address on the same agent, else the
        rendezvous address ``target``'s agent publishes."""
        if target.agent == seen_from.agent:
            return listen(target)
        variable = rendezvous_variable(target.name)
        rendezvous[variable] = rendezvous_key(case.id, target.name)
        return placeholder(variable)

    for slot in slots:
        role = roles[slot.role_name]
        placement = slot.placement
        if placement is not None:
            role_devices = placement.devices
        elif role.devices is not None:
            start, end = profile.device_groups[role.devices]
            role_devices = devices[start:end]
        else:
            role_devices = ()
        api_port = block + 1 if slot.role_name == "ffn" else block
        span = None
        if placement is not None and placement.nodes > 1:
            first = _Slot(slot.role_name, 0, placement)
            span = DpSpan(slot.node, placement.nodes, address(first, slot), rpc_ports[slot.role_name])
        connector_host = None
        if case.connector_traits and case.multi_agent:  # the connector's rendezvous role's rank 0 owns it
            owner = case.connector_traits.rendezvous_role
            connector_host = address(_Slot(owner, 0, case.placement.get(owner)), slot)
        argv = serve_argv(
            profile,
            case,
            slot.role_name,
            model_path,
            api_port,
            connector_ports[0] if connector_ports else None,
            listen_host=listen(slot),
            connector_host=connector_host,
            span=span,
            vllm_version=vllm_version,
        )
        interface = (placement.interface if placement else profile.engine.interface) if case.multi_agent else None
        env = child_env(profile, case, slot.role_name, role_devices, interface)
        unset = [name for name in profile.engine.env_strip if name not in env]
        unset += [name for name in removed_env(profile, case, slot.role_name) if name not in env and name not in unset]
        owns_rendezvous = case.connector_traits and slot.role_name == case.connector_traits.rendezvous_role
        own_ports = connector_ports if owns_rendezvous and slot.node == 0 else ()
        if span is not None and slot.node == 0:
            own_ports = (*own_ports, span.rpc_port)
        processes.append(
            ProcessPlan(
                name=slot.name,
                role="native" if case.kind == "native" else slot.role_name,
                argv=tuple(argv),
                env_set=env,
                env_unset=tuple(unset),
                out_dir_env={
                    **profiler_dir_env(case, slot.role_name),
                    **flight_recorder_dump_env(case, slot.role_name),
                },
                devices=role_devices,
                api_port=api_port,
                connector_ports=own_ports,
                serves_api=slot.role_name != "ffn" and slot.node == 0,
                placement=None
                if placement is None
                else ProcessPlacement(
                    agent_tags=dict(placement.agents),
                    interface=placement.interface,
                    listen_host=listen(slot),
                    node=slot.node,
                    nodes=placement.nodes,
                ),
            )
        )
    return tuple(processes), rendezvous


def _api_host(case: CaseSpec, api: ProcessPlan, rendezvous: dict[str, str]) -> str:
    """Where the leader's workloads reach the API: on the leader, its listen address; elsewhere, the API
    process's rendezvous address."""
    if api.placement is None:
        return placeholder(LISTEN_HOST)
    variable = rendezvous_variable(api.name)
    rendezvous[variable] = rendezvous_key(case.id, api.name)
    return placeholder(variable)


def build_plan(
    profile: Profile,
    *,
    model_path: str,
    devices: Sequence[int] = (),
    case_ids: Sequence[str] = (),
    port_base: int | None = None,
    forced_routing_control: bool = False,
    vllm_version: str | None = None,
) -> RunPlan:
    """Plan the selected cases (all by default), in profile order, each with its own port block; with
    ``forced_routing_control``, also an afd_balanced control of each AFD performance candidate (see routing_control).

    A case's port block follows from its place in the profile, not in the selection: ``--case X`` listens where X
    does in the whole run, and a follower (``join --follow X/...``, which plans X alone) agrees with its leader.

    ``vllm_version`` is the vLLM the argv is for (the run passes the installed one, ``afd-e2e plan`` says which it
    assumed): the flags that exist only from some version follow it (``plan/vllm_versions.py``); None leaves them out."""
    devices = tuple(devices) or profile.default_devices
    if len(devices) != profile.device_count:
        raise UsageError(
            f"profile {profile.name} needs {profile.device_count} devices, got {len(devices)}",
            f"pass --devices with {profile.device_count} unique ids",
        )
    for case_id in case_ids:
        profile.case(case_id)  # raises a UsageError naming the known cases
    selected = [c for c in profile.cases if not case_ids or c.id in case_ids]
    controls = routing_controls(profile, selected) if forced_routing_control else []
    control_ids = {case.id for case, _ in controls}
    base = port_base if port_base is not None else profile.engine.port_base
    stride = profile.engine.port_stride
    cases = []
    places = {case.id: index for index, case in enumerate(profile.cases)}
    places |= {case.id: len(profile.cases) + index for index, (case, _) in enumerate(controls)}
    for case in [*selected, *(case for case, _ in controls)]:
        block = base + places[case.id] * stride
        processes, rendezvous = _case_processes(profile, case, devices, model_path, block, vllm_version)
        highest = max(p for proc in processes for p in proc.ports)
        if highest > 65535:
            raise UsageError(
                f"case {case.id} needs ports up to {highest}, beyond 65535 (the highest TCP port)",
                f"lower the port base to at most {base - (highest - 65535)}",
            )
        if highest >= block + stride:
            raise UsageError(
                f"case {case.id} needs ports up to {highest}, beyond its block {block}..{block + stride - 1}",
                "raise engine.port_stride or lower the port base",
            )
        api = next(p for p in processes if p.serves_api)
        api_host = profile.engine.host
        if case.multi_agent:  # the workloads run on the leader's agent
            api_host = _api_host(case, api, rendezvous)
        base_url = f"http://{api_host}:{api.api_port}"
        cases.append(
            CasePlan(
                id=case.id,
                kind=case.kind,
                label=control_label(case.label) if case.id in control_ids else case.label,
                description=case.description,
                phases=case.phases,
                processes=processes,
                base_url=base_url,
                ready_url=base_url + profile.engine.ready_path,
                served_model_name=profile.model.served_name,
                startup_timeout_s=profile.budgets.startup_s,
                teardown_grace_s=profile.budgets.teardown_s,
                control=case.id in control_ids,
                rendezvous=rendezvous,
            )
        )
    selected_ids = {c.id for c in selected}
    comparisons = tuple(
        ComparisonPlan(c.id, c.baseline, c.candidate, c.measures)
        for c in profile.comparisons
        if c.baseline in selected_ids and c.candidate in selected_ids
    ) + tuple(ComparisonPlan(c.id, c.baseline, c.candidate, c.measures, control=True) for _, c in controls)
    return RunPlan(
        profile=profile.name,
        platform=profile.platform,
        smoke_only=profile.smoke_only,
        model_path=model_path,
        devices=devices,
        cases=tuple(cases),
        comparisons=comparisons,
        series=plan_series(profile, cases, comparisons),
        vllm_version=vllm_version,
    )
