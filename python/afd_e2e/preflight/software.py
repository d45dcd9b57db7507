"""Where the agent's software is checked, in the environment that will run it: the ``vllm`` executable is resolved
as the runner resolves it, and its own interpreter (its shebang) reports vLLM's version, torch's version, the
``vllm.general_plugins`` entry points (the AFD plugin) and, when the plan has a forced-routing control, the MoE routing
strategies vLLM knows. Both interpreters are reported: afd-e2e may sit in a virtual environment of its own.
nvidia-ml-py is afd-e2e's own dependency (it reads NVML), so it is looked up here."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Any

from afd_e2e.errors import UsageError
from afd_e2e.plan import RunPlan
from afd_e2e.plan.routing_control import STRATEGY_ENV, strategy_refusal
from afd_e2e.plan.vllm_versions import breaches
from afd_e2e.preflight.checks import PreflightCheck, failed, passed, skipped
from afd_e2e.profile import Profile
from afd_e2e.profile.bench_spec import bench_spec
from afd_e2e.profile.model import MODEL_RUNNER_ENV
from afd_e2e.system.engine_probe import ProbeFailed, probe_engine
from afd_e2e.system.executables import resolve_executable
from afd_e2e.workloads.bench import shape_flags

VLLM, AFD_PLUGIN, ROUTING, NVML = "vllm", "afd plugin", "routing strategy", "nvidia-ml-py"
MODEL_RUNNER = "model runner"
VERSION_RULES = "vllm version rules"
BENCH_FLAGS = "bench load shapes"
PLUGIN_GROUP, PLUGIN_NAME = "vllm.general_plugins", "afd"


@dataclass(frozen=True)
class InstalledSoftware:
    """What the agent has, each item read where it is used."""

    afd_e2e_python: str  # the interpreter running afd-e2e (and NVML)
    vllm_executable: str | None  # where the profile's engine.executable resolves; None: not found
    vllm_python: str | None  # that executable's interpreter, which answered the probe
    vllm: str | None  # version in vllm_python
    torch: str | None  # version in vllm_python
    afd_plugin: str | None  # the entry point's target, e.g. "afd_plugin:register"
    routing_strategies: tuple[str, ...] | None  # None: not asked (no control planned) or vLLM could not say
    problem: str | None  # why vllm_python could not be asked, or why it could not list routing strategies
    nvidia_ml_py: str | None  # version in afd_e2e_python, or "present" when pynvml is there without metadata
    afd_plugin_version: str | None = None  # the version of the distribution the entry point comes from
    triton: str | None = None  # version in vllm_python; vLLM's Model Runner V2 refuses to start without it
    # the flags the installed ``vllm bench serve`` defines (the load shapes' check); None: could not be read
    bench_flags: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_record(self) -> dict[str, str | None]:
        """Flat text values, as results.json's preflight.software stores them."""
        strategies = self.routing_strategies
        record = {k: v for k, v in asdict(self).items() if k != "bench_flags"}  # judged by the bench check
        return {**record, "routing_strategies": ", ".join(strategies) if strategies is not None else None}


def _nvml_version() -> str | None:
    try:
        return metadata.version("nvidia-ml-py")
    except metadata.PackageNotFoundError:
        return "present" if importlib.util.find_spec("pynvml") else None


def control_env(plan: RunPlan) -> dict[str, str] | None:
    """The environment a forced-routing control process gets (its VLLM_PLUGINS matter); None without a control."""
    process = next((p for case in plan.cases if case.control for p in case.processes), None)
    if process is None:
        return None
    env = {k: v for k, v in os.environ.items() if k not in process.env_unset}
    return {**env, **process.env_set}


def read_installed(executable: str, *, routing_env: Mapping[str, str] | None = None) -> InstalledSoftware:
    """Resolve ``executable`` and ask its interpreter; with ``routing_env``, also the routing strategies vLLM knows
    when started with that environment (takes seconds: it imports vLLM and torch there)."""
    empty = dict.fromkeys(("vllm_executable", "vllm_python", "vllm", "torch", "afd_plugin", "routing_strategies"))
    base = {**empty, "afd_e2e_python": sys.executable, "nvidia_ml_py": _nvml_version(), "problem": None}
    try:
        path = resolve_executable(executable)
    except UsageError as exc:
        return InstalledSoftware(**{**base, "problem": exc.problem})
    try:
        engine = probe_engine(path, routing_strategies=routing_env is not None, env=routing_env)
    except ProbeFailed as exc:
        return InstalledSoftware(**{**base, "vllm_executable": path, "problem": str(exc)})
    return InstalledSoftware(
        **{
            **base,
            "vllm_executable": path,
            "vllm_python": engine.python,
            "vllm": engine.vllm,
            "torch": engine.torch,
            "afd_plugin": engine.general_plugins.get(PLUGIN_NAME),
            "afd_plugin_version": engine.plugin_versions.get(PLUGIN_NAME),
            "triton": engine.triton,
            "bench_flags": engine.bench_flags,
            "routing_strategies": engine.routing_strategies,
            "problem": engine.routing_error,
        }
    )


def installed_vllm_version(executable: str) -> str | None:
    """The version of the vLLM ``executable`` resolves to (its interpreter asked: a fraction of a second), which
    the plan's argv is built for; None where it cannot be told (the vllm check says why)."""
    return read_installed(executable).vllm


def check_software(profile: Profile, plan: RunPlan, installed: InstalledSoftware) -> list[PreflightCheck]:
    checks = [_vllm(profile, installed), _plugin(profile, plan, installed), _version_rules(plan, installed)]
    if (spec := bench_spec(profile)) is not None and (flags := shape_flags(spec)):
        checks.append(_bench_flags(flags, installed))
    if any(case.control for case in plan.cases):
        checks.append(_routing(installed))
    if v2 := [case.id for case in plan.cases if any(p.env_set.get(MODEL_RUNNER_ENV) == "1" for p in case.processes)]:
        checks.append(_model_runner_v2(v2, installed))
    return [*checks, _nvml(profile, installed.nvidia_ml_py)]


def _bench_flags(flags: Mapping[str, str], installed: InstalledSoftware) -> PreflightCheck:
    """Every flag the profile's load shapes add (``workloads/bench.py``'s ``shape_flags``: flag to profile key)
    against the flags the installed ``vllm bench serve`` defines: its parser would exit on an unknown one at the
    first repetition, after the servers had loaded, so a key it lacks is refused here, in one line naming the
    version, the flag and the key."""
    wanted = f"vllm bench serve with {', '.join(flags)}"
    if installed.bench_flags is None:
        return skipped(BENCH_FLAGS, "the installed vllm bench serve's flags could not be read (see the vllm check)")
    version = f"vLLM {installed.vllm or '(unknown version)'}"
    if missing := [flag for flag in flags if flag not in installed.bench_flags]:
        return failed(
            BENCH_FLAGS,
            f"{version}'s vllm bench serve has no {missing[0]} (asked by {flags[missing[0]]})"
            + (f"; nor {', '.join(missing[1:])}" if len(missing) > 1 else ""),
            wanted,
            f"drop {flags[missing[0]]} from the profile, or install a vLLM whose vllm bench serve has {missing[0]}",
        )
    return passed(BENCH_FLAGS, f"{version}'s vllm bench serve has all {len(flags)}", wanted)


def _model_runner_v2(cases: list[str], installed: InstalledSoftware) -> PreflightCheck:
    """Cases that ask for Model Runner V2 need Triton beside vLLM: without it vLLM refuses to start ("Model Runner V2
    requires Triton", vLLM 0.32's CPU install), after the whole start-up budget of waiting for nothing."""
    wanted = "Triton beside vLLM (Model Runner V2 needs it)"
    asking = f"{', '.join(cases)} ask{'s' if len(cases) == 1 else ''} for model runner V2"
    if installed.vllm_python is None:
        return skipped(MODEL_RUNNER, f"{asking}; vLLM's Python could not be asked")
    if installed.triton is None:
        return failed(
            MODEL_RUNNER,
            f"{asking}, and vLLM {installed.vllm or '(unknown version)'} in {installed.vllm_python} has no Triton: "
            "it refuses to start ('Model Runner V2 requires Triton')",
            wanted,
            "set model_runner: v1 (engine.model_runner or the case's), or run on an agent whose vLLM has Triton",
        )
    return passed(MODEL_RUNNER, f"{asking}; Triton {installed.triton} in {installed.vllm_python}", wanted)


def _version_rules(plan: RunPlan, installed: InstalledSoftware) -> PreflightCheck:
    """Every process's argv against the rules of the installed vLLM's version (``plan/vllm_versions.py``): a flag
    it lacks fails its argument parser, a DBO threshold it refuses fails its config after the model is loaded; both
    are refused here, before any launch, naming the first (case and role), the rule and the fix."""
    wanted = "argv the installed vLLM accepts (plan/vllm_versions.py)"
    if installed.vllm is None:
        return skipped(VERSION_RULES, "the installed vLLM's version could not be read (see the vllm check)")
    found = [
        (case.id, process.name, breach)
        for case in plan.cases
        for process in case.processes
        for breach in breaches(process.argv, installed.vllm)
    ]
    if found:
        case_id, name, breach = found[0]
        more = f" ({len(found) - 1} more alike)" if len(found) > 1 else ""
        return failed(
            VERSION_RULES, f"case {case_id} {name}: {breach.found} breaks {breach.rule}{more}", wanted, breach.fix
        )
    count = sum(len(case.processes) for case in plan.cases)
    return passed(VERSION_RULES, f"{count} process(es) fit vLLM {installed.vllm}", wanted)


def _vllm(profile: Profile, installed: InstalledSoftware) -> PreflightCheck:
    wanted_version = profile.software.vllm_version
    wanted = wanted_version or "installed"
    install = (
        "scripts/install-cpu-vllm"
        if profile.platform == "cpu"
        else f"pip install vllm=={wanted_version or '<version>'} into the Python that runs vllm"
    )
    ours = f"afd-e2e runs in {installed.afd_e2e_python}"
    if installed.vllm_executable is None:
        return failed(VLLM, f"{profile.engine.executable!r} not found ({installed.problem}); {ours}", wanted, install)
    if installed.vllm_python is None:
        return failed(VLLM, f"{installed.vllm_executable}: {installed.problem}", wanted, install)
    where = f"in {installed.vllm_python} (the Python of {installed.vllm_executable}); {ours}"
    if installed.vllm is None:
        return failed(VLLM, f"not installed {where}", wanted, install)
    public = installed.vllm.split("+")[0]  # 0.26.0+cu130 is 0.26.0 built for CUDA 13.0
    measured = f"{installed.vllm}, torch {installed.torch or 'missing'}, {where}"
    if wanted_version and public != wanted_version:
        return failed(VLLM, measured, wanted, install)
    return passed(VLLM, measured, wanted)


def _plugin(profile: Profile, plan: RunPlan, installed: InstalledSoftware) -> PreflightCheck:
    if not (profile.software.afd_plugin or any(case.kind == "afd" for case in plan.cases)):
        return skipped(AFD_PLUGIN, "no AFD case planned")
    wanted = f"entry point {PLUGIN_NAME!r} in group {PLUGIN_GROUP}"
    if installed.vllm_python is None:
        return failed(AFD_PLUGIN, "cannot tell: vLLM's Python could not be asked", wanted, "see the vllm check")
    if installed.afd_plugin is None:
        fix = "install the AFD plugin from its checkout (uv sync --extra vllm) into the Python that runs vllm"
        return failed(AFD_PLUGIN, f"not installed in {installed.vllm_python}", wanted, fix)
    return passed(AFD_PLUGIN, f"{installed.afd_plugin} in {installed.vllm_python}", wanted)


def _routing(installed: InstalledSoftware) -> PreflightCheck:
    wanted = f"{STRATEGY_ENV} value known to vLLM"
    refusal = strategy_refusal(installed.routing_strategies, installed.problem, installed.vllm)
    if refusal is not None:
        return failed(ROUTING, refusal.problem, wanted, refusal.fix)
    return passed(ROUTING, f"knows {', '.join(installed.routing_strategies or ())}", wanted)


def _nvml(profile: Profile, version: str | None) -> PreflightCheck:
    if profile.platform == "cpu":
        return skipped(NVML, f"profile {profile.name} runs on the CPU")
    if version is None:
        return failed(NVML, "not installed", "installed", "pip install nvidia-ml-py")
    return passed(NVML, version, "installed")


SOFTWARE_FIELDS = frozenset(InstalledSoftware.__dataclass_fields__)


def describe_software(found: Mapping[str, str | None]) -> str:
    """A preflight's software record (results.json's ``preflight.software``) as one sentence. Only what was looked for
    and missing reads as missing: no routing strategies means none were asked for, no problem means none occurred
    (listing each field as ``name value`` said ``routing_strategies not found, problem not found``)."""
    vllm, torch, python, executable = (found.get(k) for k in ("vllm", "torch", "vllm_python", "vllm_executable"))
    problem = found.get("problem")
    if vllm:
        engine = f"vLLM {vllm}" + (f" with torch {torch}" if torch else "") + (f" in {python}" if python else "")
        engine += f" (the Python of {executable})" if executable else ""
    elif python:
        engine = f"vLLM not installed in {python} (the Python of {executable})"
    elif executable:
        engine = f"vLLM could not be asked through {executable}"
    else:
        engine = "no vllm executable found" if "vllm_executable" in found else "vLLM not recorded"
    parts = [f"{engine}: {problem}" if problem and not vllm else engine]
    if problem and vllm:
        parts.append(f"its routing strategies unknown: {problem}")
    if vllm and "afd_plugin" in found:
        plugin, version = found["afd_plugin"], found.get("afd_plugin_version")
        parts.append(
            f"AFD plugin {plugin}" + (f" {version}" if version else "") if plugin else "no AFD plugin installed"
        )
    if found.get("routing_strategies"):
        parts.append(f"MoE routing strategies {found['routing_strategies']}")
    if "nvidia_ml_py" in found:
        parts.append(f"nvidia-ml-py {found['nvidia_ml_py']}" if found["nvidia_ml_py"] else "no nvidia-ml-py")
    if found.get("afd_e2e_python"):
        parts.append(f"afd-e2e runs in {found['afd_e2e_python']}")
    parts += [f"{name} {value}" for name, value in found.items() if name not in SOFTWARE_FIELDS and value]
    return "; ".join(parts) + "."
