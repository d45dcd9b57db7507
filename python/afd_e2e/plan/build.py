"""The pure function profile + devices + model path + port base -> RunPlan."""

from __future__ import annotations

from collections.abc import Sequence

from afd_e2e.errors import UsageError
from afd_e2e.plan.model import CasePlan, ComparisonPlan, ProcessPlan, RunPlan
from afd_e2e.plan.routing_control import control_label, routing_controls
from afd_e2e.plan.serve_argv import child_env, serve_argv
from afd_e2e.profile import CaseSpec, Profile


def _case_processes(
    profile: Profile, case: CaseSpec, devices: tuple[int, ...], model_path: str, block: int
) -> tuple[ProcessPlan, ...]:
    """Processes in launch order: FFN before Attention (the synchronous P2P connector waits for FFN)."""
    processes = []
    roles = case.roles()
    connector_ports: tuple[int, ...] = ()
    if case.kind == "afd":
        assert case.ffn
        rendezvous = block + 2
        connector_ports = tuple(range(rendezvous, rendezvous + case.ffn.ranks + 1))
    for role_name, role in roles.items():
        role_devices: tuple[int, ...] = ()
        if role.devices is not None:
            start, end = profile.device_groups[role.devices]
            role_devices = devices[start:end]
        api_port = block + 1 if role_name == "ffn" else block
        argv = serve_argv(
            profile, case, role_name, model_path, api_port, connector_ports[0] if connector_ports else None
        )
        env = child_env(profile, case, role_devices)
        processes.append(
            ProcessPlan(
                name=role_name,
                role="native" if case.kind == "native" else role_name,
                argv=tuple(argv),
                env_set=env,
                env_unset=tuple(name for name in profile.engine.env_strip if name not in env),
                devices=role_devices,
                api_port=api_port,
                connector_ports=connector_ports if role_name == "ffn" else (),
                serves_api=role_name != "ffn",
            )
        )
    return tuple(processes)


def build_plan(
    profile: Profile,
    *,
    model_path: str,
    devices: Sequence[int] = (),
    case_ids: Sequence[str] = (),
    port_base: int | None = None,
    forced_routing_control: bool = False,
) -> RunPlan:
    """Plan the selected cases (all by default), in profile order, each with its own port block; with
    ``forced_routing_control``, also an afd_balanced control of each AFD performance candidate (see routing_control)."""
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
    for index, case in enumerate([*selected, *(case for case, _ in controls)]):
        block = base + index * stride
        processes = _case_processes(profile, case, devices, model_path, block)
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
        base_url = f"http://{profile.engine.host}:{api.api_port}"
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
    )
