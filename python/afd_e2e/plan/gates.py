"""Environment gates: the explicit opt-in that must be present before a profile may run.

Pure: takes a profile and an environment mapping, returns a decision. A gate that is simply not set closes the
profile (with the reason); a gate that is set but malformed is an error with a one-line fix, never a silent skip.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from afd_e2e.errors import EXIT_BAD_INPUT, EXIT_GATES_CLOSED, EXIT_PASSED, UsageError
from afd_e2e.profile import Profile

BACKEND_ENV = "AFD_E2E_BACKEND"
LARGE_MODEL_ENV = "AFD_E2E_LARGE_MODEL"

OPEN, CLOSED, INVALID = "open", "closed", "invalid"


@dataclass(frozen=True)
class GateDecision:
    """``open`` runs; ``closed`` lists what is not opted in; ``invalid`` holds each malformed value as a UsageError
    (its rendering also leads ``reasons``)."""

    status: str
    reasons: tuple[str, ...] = ()
    model_path: str | None = None
    devices: tuple[int, ...] = field(default_factory=tuple)
    errors: tuple[UsageError, ...] = ()

    @property
    def is_open(self) -> bool:
        return self.status == OPEN

    @property
    def exit_code(self) -> int:
        return {OPEN: EXIT_PASSED, CLOSED: EXIT_GATES_CLOSED, INVALID: EXIT_BAD_INPUT}[self.status]

    def usage_error(self, context: str) -> UsageError:
        """The malformed gates as one UsageError (problems and fixes each joined once)."""
        problems = "; ".join(e.problem for e in self.errors)
        return UsageError(f"{context}: {problems}", "; ".join(dict.fromkeys(e.fix for e in self.errors)))


def parse_devices(text: str, expected: int, source: str) -> tuple[int, ...]:
    """Parse a comma-separated device list; UsageError naming the entry and the fix."""
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise UsageError(f"{source}={text!r} has an empty entry", f"give {expected} comma-separated GPU ids, e.g. 0,1")
    devices: list[int] = []
    for item in items:
        if not item.lstrip("-").isdigit():
            raise UsageError(f"{source}={text!r}: {item!r} is not an integer", "use GPU ids like 0,2,4,6")
        value = int(item)
        if value < 0:
            raise UsageError(f"{source}={text!r}: {value} is negative", "GPU ids start at 0")
        devices.append(value)
    duplicates = sorted({d for d in devices if devices.count(d) > 1})
    if duplicates:
        raise UsageError(f"{source}={text!r} repeats {duplicates}", "list each GPU once")
    if len(devices) != expected:
        raise UsageError(f"{source}={text!r} lists {len(devices)} devices", f"this profile needs exactly {expected}")
    return tuple(devices)


def requested_model(profile: Profile, env: Mapping[str, str], flag: str | None) -> str:
    """The checkpoint folder asked for: --model, else the profile's model env gate ('' when neither)."""
    return flag or env.get(profile.gates.model_env, "")


def requested_devices(profile: Profile, env: Mapping[str, str], flag: str | None) -> tuple[str, str]:
    """The device list asked for and where it came from: --devices, else the profile's devices env gate ('' when
    neither). --devices for a CPU profile is refused."""
    if flag and not profile.device_count:
        raise UsageError(f"--devices={flag} given but profile {profile.name} runs on the CPU", "drop --devices")
    if flag is not None:
        return flag, "--devices"
    return env.get(profile.gates.devices_env or "", ""), profile.gates.devices_env or "devices"


def plan_devices(profile: Profile, env: Mapping[str, str], flag: str | None) -> tuple[int, ...]:
    """The devices a plan is drawn for (``afd-e2e plan``, ``preflight``): as asked, else the profile's default
    order; never closed."""
    raw, source = requested_devices(profile, env, flag)
    if not raw or not profile.device_count:
        return profile.default_devices
    return parse_devices(raw, profile.device_count, source)


def evaluate_gates(
    profile: Profile,
    env: Mapping[str, str],
    *,
    model_path: str | None = None,
    devices: str | None = None,
    require_model_dir: bool = True,
) -> GateDecision:
    """Decide whether ``profile`` may run under ``env``; explicit ``model_path``/``devices`` override the env.

    ``require_model_dir=False`` only checks that the model gate is set: the pipeline generator runs on a lightweight
    agent where the checkpoint does not exist; the GPU agent's environment hook checks the directory itself.
    """
    gates = profile.gates
    closed: list[str] = []
    invalid: list[UsageError] = []

    backend = env.get(BACKEND_ENV, "")
    if not backend:
        closed.append(f"{BACKEND_ENV} is not set; set {BACKEND_ENV}={gates.backend} to opt in")
    elif backend != gates.backend:
        if backend in ("gpu", "cpu"):
            closed.append(f"{BACKEND_ENV}={backend} but profile {profile.name} runs on {gates.backend}")
        else:
            invalid.append(UsageError(f"{BACKEND_ENV}={backend!r} is not a backend", "set it to gpu or cpu"))

    if gates.large_model:
        flag = env.get(LARGE_MODEL_ENV, "")
        if not flag:
            closed.append(f"{LARGE_MODEL_ENV} is not set; set {LARGE_MODEL_ENV}=1 to opt in to large-model runs")
        elif flag == "0":
            closed.append(f"{LARGE_MODEL_ENV}=0 opts out of large-model runs")
        elif flag != "1":
            invalid.append(UsageError(f"{LARGE_MODEL_ENV}={flag!r} is not 0 or 1", f"set {LARGE_MODEL_ENV}=1"))

    path = requested_model(profile, env, model_path)
    resolved_model: str | None = None
    if not path:
        closed.append(f"{gates.model_env} is not set; point it at the staged checkpoint directory")
    elif not require_model_dir:
        resolved_model = path
    elif not Path(path).is_dir():
        what = "a file" if Path(path).exists() else "missing"
        if model_path:  # name what the user typed
            invalid.append(UsageError(f"--model {path} is {what}, not a directory", "pass --model a checkpoint folder"))
        else:
            invalid.append(
                UsageError(f"{gates.model_env}={path} is {what}, not a directory", "point it at the checkpoint folder")
            )
    else:
        resolved_model = str(Path(path).resolve())

    resolved_devices: tuple[int, ...] = ()
    if profile.device_count:
        raw, source = requested_devices(profile, env, devices)
        if not raw:
            example = ",".join(str(d) for d in profile.default_devices) or "0,1"
            closed.append(f"{source} is not set; set {gates.devices_env}={example} ({profile.device_count} unique ids)")
        else:
            try:
                resolved_devices = parse_devices(raw, profile.device_count, source)
            except UsageError as exc:
                invalid.append(exc)

    if invalid:
        return GateDecision(INVALID, tuple([*map(str, invalid), *closed]), errors=tuple(invalid))
    if closed:
        return GateDecision(CLOSED, tuple(closed))
    return GateDecision(OPEN, (), resolved_model, resolved_devices)
