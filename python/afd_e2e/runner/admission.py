"""Can this run start? One step: the profile, the environment and the flags in; an executable plan out, or every
reason it cannot.

In order: ``--devices`` and ``--port-base`` as given; the opt-in gates (closed gates are not an error: the run is
not asked for here); then the plan; the checkpoint; the out folder; each planned phase's inputs; only then is the
installed vLLM asked anything: the plan is built again for its version (``plan/vllm_versions.py``) and the
forced-routing control dropped, with a note, where it lacks its strategy; the plan's ports and
executables; idle GPUs. Preflight is taken between the phase inputs and the ports: an agent that does not fit is
recorded as the run's verdict, not refused. ``afd-e2e run`` admits before anything is launched; ``execute_run``
admits a plan it is handed (tests) with the same checks from the phase inputs on.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

from afd_e2e.buildkite.env import JOB_ID, job_id
from afd_e2e.errors import UsageError
from afd_e2e.gpu.machine_probe import read_machine
from afd_e2e.gpu.readings import MachineReadings
from afd_e2e.plan import RunPlan, build_plan
from afd_e2e.plan.addresses import placeholders
from afd_e2e.plan.gates import BACKEND_ENV, CLOSED, INVALID, evaluate_gates, requested_devices
from afd_e2e.plan.model import CasePlan
from afd_e2e.plan.routing_control import strategy_refusal
from afd_e2e.preflight.checkpoint import check_checkpoint
from afd_e2e.preflight.checks import FAIL, PreflightCheck
from afd_e2e.preflight.software import control_env, installed_vllm_version, read_installed
from afd_e2e.profile import Profile
from afd_e2e.results.model import PreflightRecord
from afd_e2e.results.status import Status
from afd_e2e.runner import dispatch
from afd_e2e.runner.busy_gpus import busy_gpus, refuse_busy_gpus
from afd_e2e.system.executables import resolve_executable
from afd_e2e.system.ports import ANY_HOST, busy_ports

MAX_PORT = 65535
KERNEL_FILESYSTEMS = (Path("/proc"), Path("/sys"), Path("/dev"))


@dataclass(frozen=True)
class RunRequest:
    """What ``afd-e2e run``'s flags ask for."""

    out: Path
    model: str | None = None
    devices: str | None = None
    case_ids: tuple[str, ...] = ()
    port_base: int | None = None
    forced_routing_control: bool = False
    gsm8k_dir: Path | None = None
    allow_busy_gpus: bool = False


@dataclass(frozen=True)
class Admission:
    """An executable ``plan`` (with its resolved ``executables`` and the ``busy`` GPUs allowed), or why not:
    ``closed`` gates (not opted in) or ``refusals`` (bad input, each a one-line problem and fix)."""

    plan: RunPlan | None = None
    model_path: str | None = None
    executables: Mapping[str, str] = field(default_factory=dict)
    busy: tuple[PreflightCheck, ...] = ()
    notes: tuple[str, ...] = ()  # what was dropped from the plan, and why
    preflight: PreflightRecord | None = None  # taken once the inputs are good; a misfit stops the run, recorded
    closed: tuple[str, ...] = ()
    refusals: tuple[UsageError, ...] = ()

    @property
    def admitted(self) -> bool:
        """A plan that can run; or one whose preflight misfit the run records as its verdict."""
        return self.plan is not None and not self.closed and not self.refusals

    @property
    def misfit(self) -> bool:
        return self.preflight is not None and self.preflight.status is Status.FAILED

    def error(self) -> UsageError:
        """The refusals as one UsageError: the one refusal itself, or every problem and fix joined."""
        if len(self.refusals) == 1:
            return self.refusals[0]
        problems = "; ".join(e.problem for e in self.refusals)
        return UsageError(problems, "; ".join(dict.fromkeys(e.fix for e in self.refusals)))


def gate_environment(profile: Profile, env: Mapping[str, str]) -> dict[str, str]:
    """What the gates see: a CPU profile needs no backend opt-in, so the embedded default runs with no env set."""
    seen = dict(env)
    if profile.platform == "cpu":
        seen.setdefault(BACKEND_ENV, "cpu")
    return seen


def admit(
    profile: Profile,
    env: Mapping[str, str],
    request: RunRequest,
    *,
    preflight: Callable[[RunPlan, str], PreflightRecord] | None = None,
    read_hardware: Callable[[], MachineReadings] = read_machine,
    dry_run: bool = False,
) -> Admission:
    """Every check a run must pass before anything is launched (see the module's docstring); ``preflight`` takes
    the preflight of the plan and model folder. A refused run, or any ``dry_run`` (it writes nothing), leaves no
    out folder behind that this check made."""
    made = _first_missing(Path(os.path.abspath(request.out)))
    admission = _admit(profile, env, request, preflight=preflight, read_hardware=read_hardware)
    if made is not None and (admission.refusals or dry_run):
        _remove_empty(Path(os.path.abspath(request.out)), made)
    return admission


def _placed_on_other_agents(plan: RunPlan, env: Mapping[str, str]) -> list[UsageError]:
    """Cases with a role placed on another agent meet their followers through this build's meta-data: they run
    only inside a Buildkite job (the leader's job id is the prefix of every key they share)."""
    placed = [c.id for c in plan.cases if c.remote_processes]
    if not placed or job_id(env):
        return []
    return [
        UsageError(
            f"case {', '.join(placed)} places roles on other agents (placement): it meets them through build "
            f"meta-data, and {JOB_ID} is not set (not inside a Buildkite job)",
            "run it from the plugin's leader step, or run the profile's single-agent cases with --case",
        )
    ]


def _first_missing(path: Path) -> Path | None:
    """The outermost folder of ``path`` that does not exist yet (what creating it would make), or None."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    return missing[-1] if missing else None


def _remove_empty(path: Path, top: Path) -> None:
    """Remove ``path`` and its parents up to ``top`` while they are empty folders."""
    for folder in (path, *path.parents):
        if not folder.is_dir() or any(folder.iterdir()):
            return
        folder.rmdir()
        if folder == top:
            return


def _admit(
    profile: Profile,
    env: Mapping[str, str],
    request: RunRequest,
    *,
    preflight: Callable[[RunPlan, str], PreflightRecord] | None,
    read_hardware: Callable[[], MachineReadings],
) -> Admission:
    refusals = _refused(
        lambda: requested_devices(profile, env, request.devices), lambda: check_port_base(request.port_base)
    )
    if refusals:
        return Admission(refusals=tuple(refusals))
    decision = evaluate_gates(
        profile, gate_environment(profile, env), model_path=request.model, devices=request.devices
    )
    if decision.status == INVALID:
        return Admission(refusals=(decision.usage_error(f"profile {profile.name}"),))
    if decision.status == CLOSED and profile.platform == "cpu":  # asking for a CPU profile is its opt-in
        return Admission(refusals=(missing_model(profile),))
    if decision.status == CLOSED:
        return Admission(closed=decision.reasons)
    assert decision.model_path is not None
    planned = partial(
        build_plan,
        profile,
        model_path=decision.model_path,
        devices=decision.devices,
        case_ids=request.case_ids,
        port_base=request.port_base,
        forced_routing_control=request.forced_routing_control,
    )
    try:
        plan = planned()  # for no vLLM yet: the bad input is refused before the installed one is asked anything
    except UsageError as exc:
        return Admission(refusals=(exc,))
    refusals += _placed_on_other_agents(plan, env)
    checkpoint = check_checkpoint(profile.model.checkpoint, plan.model_path, profile.gates.model_env, plan)
    failed = [c for c in checkpoint if c.status == FAIL]
    refusals += [UsageError(f"{c.name}: {c.measured}", c.fix) for c in failed[:1]]  # the family's first failure
    refusals += _refused(lambda: check_out_dir(request.out))
    refusals += _input_refusals(profile, plan, request.gsm8k_dir)  # the phases' inputs are named too
    if refusals:  # nothing past them is worth probing
        return Admission(plan, decision.model_path, refusals=tuple(refusals))
    plan = planned(vllm_version=installed_vllm_version(profile.engine.executable))  # its argv for the vLLM launched
    plan, skipped = without_unrunnable_control(profile, plan)
    model_path = decision.model_path
    admitted = admit_plan(
        profile,
        plan,
        gsm8k_dir=request.gsm8k_dir,
        allow_busy_gpus=request.allow_busy_gpus,
        preflight=partial(preflight, plan, model_path) if preflight else None,
        read_hardware=read_hardware,
    )
    notes = (skipped,) if skipped else ()
    return replace(admitted, model_path=decision.model_path, notes=notes, refusals=(*refusals, *admitted.refusals))


def admit_plan(
    profile: Profile,
    plan: RunPlan,
    *,
    gsm8k_dir: Path | None = None,
    allow_busy_gpus: bool = False,
    preflight: Callable[[], PreflightRecord] | None = None,
    read_hardware: Callable[[], MachineReadings] = read_machine,
    hosted: Callable[[CasePlan], Collection[str]] | None = None,
) -> Admission:
    """A built plan's own checks: each planned phase's inputs; then the preflight, whose misfit is recorded (the
    run writes it as its verdict); then the ports and executables of the processes this agent hosts (``hosted``;
    default: those not placed on another agent), idle GPUs."""
    refusals = _input_refusals(profile, plan, gsm8k_dir)
    if refusals:
        return Admission(plan, plan.model_path, refusals=tuple(refusals))
    checked = preflight() if preflight is not None else None
    if checked is not None and checked.status is Status.FAILED:
        return Admission(plan, plan.model_path, preflight=checked)
    executables: dict[str, str] = {}

    def can_start() -> None:
        executables.update(check_can_start(plan, hosted))

    busy = busy_gpus(profile, plan, read_hardware)
    refusals += _refused(can_start, lambda: refuse_busy_gpus(busy, allow_busy_gpus))
    return Admission(plan, plan.model_path, executables, tuple(busy), preflight=checked, refusals=tuple(refusals))


def _input_refusals(profile: Profile, plan: RunPlan, gsm8k_dir: Path | None) -> list[UsageError]:
    """What each planned phase will read (``Phase.check_inputs``)."""
    planned = {name for case in plan.cases for name in case.phases}
    inputs = [run.check_inputs for run in dispatch.RUNS.values() if run.name in planned and run.check_inputs]
    return _refused(*(partial(check, profile, gsm8k_dir) for check in inputs))


def _refused(*checks: Callable[[], object]) -> list[UsageError]:
    """Run every check; the UsageErrors they raised."""
    refusals = []
    for check in checks:
        try:
            check()
        except UsageError as exc:
            refusals.append(exc)
    return refusals


def without_unrunnable_control(profile: Profile, plan: RunPlan) -> tuple[RunPlan, str | None]:
    """The plan without its forced-routing control, and why, when the vLLM to be launched lacks the strategy
    (vLLM would only raise in the FFN engine's first forward, after the model loaded); else the plan as it is."""
    env = control_env(plan)
    if env is None:
        return plan, None
    installed = read_installed(profile.engine.executable, routing_env=env)
    refusal = strategy_refusal(installed.routing_strategies, installed.problem, installed.vllm)
    if refusal is None:
        return plan, None
    return plan.without_controls(), f"forced-routing control skipped: {refusal}"


def missing_model(profile: Profile) -> UsageError:
    """A CPU profile asked for with no model folder: the flag to pass, and how to build the tiny model."""
    return UsageError(
        f"profile {profile.name} needs a model folder: --model was not given and {profile.gates.model_env} is not set",
        "pass --model DIR; to build the tiny model: afd-e2e tiny-model --out .tiny-model, then --model .tiny-model",
    )


def check_can_start(plan: RunPlan, hosted: Callable[[CasePlan], Collection[str]] | None = None) -> dict[str, str]:
    """Every port of the processes this agent hosts free (on every interface where the address is another
    agent's to fill in), every executable found. Returns argv[0] -> path."""
    ports_by_host: dict[str, list[int]] = {}
    for case in plan.cases:
        here = hosted(case) if hosted is not None else {p.name for p in case.leader_processes}
        host = urlsplit(case.base_url).hostname or "127.0.0.1"
        ports = [port for p in case.processes if p.name in here for port in p.ports]
        ports_by_host.setdefault(ANY_HOST if placeholders(case.base_url) else host, []).extend(ports)
    for host, ports in ports_by_host.items():
        busy = busy_ports(ports, host)
        if busy:
            held = ", ".join(f"port {port} is held by {who}" for port, who in busy.items())
            raise UsageError(
                f"{held} (needed by the plan)", "stop that process, run `afd-e2e cleanup`, or pass another --port-base"
            )
    names = {process.argv[0] for case in plan.cases for process in case.processes}
    return {name: resolve_executable(name) for name in sorted(names)}


def check_port_base(port_base: int | None) -> None:
    if port_base is not None and not 1 <= port_base <= MAX_PORT:
        raise UsageError(
            f"--port-base {port_base} is outside 1..{MAX_PORT}, the TCP port range",
            "pass a port base such that the whole plan fits below 65536, e.g. 20000",
        )


def check_out_dir(out: Path) -> None:
    """The results folder can be created and written: not on a kernel filesystem, not a file, not below a file."""
    resolved = Path(os.path.abspath(out))
    kernel = next((k for k in KERNEL_FILESYSTEMS if resolved == k or k in resolved.parents), None)
    fix = "pass --out a folder on a writable disk, e.g. afd-e2e-out"
    if kernel is not None:
        raise UsageError(f"--out {out} is under {kernel}, a kernel filesystem, not a disk", fix)
    if resolved.exists() and not resolved.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder", fix)
    blocking = next((p for p in resolved.parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise UsageError(f"--out {out} is below {blocking}, which is a file", fix)
    try:
        resolved.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=resolved):
            pass
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write there ({exc.strerror or exc})", fix) from exc
