"""Where ``vllm serve`` argv and child environments are built, for native and AFD (XAYF) roles.

Follows the upstream AFD runner: every role gets DP/TP sizes and expert parallel; AFD roles get an
``--additional-config`` with the connector, rendezvous host/port and rank counts (DP x TP of each role), the fields
its traits need and the case's ``connector_extra_config`` (``profile/connectors.py``); Attention
serves the API on the case's port, FFN on the next one. Case options then add the CUDA-graph and DBO flags as the
plugin's runner writes them, ``--shutdown-timeout`` (half of ``budgets.teardown_s``) where the vLLM the plan is for has it
(``plan/vllm_versions.py``: without it vLLM's own shutdown waits on its processes unbounded), and the case's edits
(its parent's first) remove and add flags and variables per role.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from afd_e2e.plan.vllm_versions import SHUTDOWN_TIMEOUT, has_flag
from afd_e2e.profile import CaseSpec, GraphSpec, Profile, ProfilerSpec, RoleSpec
from afd_e2e.profile.model import MODEL_RUNNER_ENV

# Set on every child: no hub access, no telemetry, unbuffered logs so progress lines arrive in time.
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "PYTHONUNBUFFERED": "1",
}
AFD_ENV = {"VLLM_PLUGINS": "afd"}
# ``engine.model_runner`` (or the case's) as vLLM reads it; ``auto`` sets nothing and removes an inherited value.
RUNNER_ENV = {"v1": "0", "v2": "1"}
# The AFD plugin's per-role torch profiler (afd_plugin/compat/profiler.py): <prefix>_ENABLE, _WAIT, _WARMUP,
# _ACTIVE, _REPEAT, _SKIP_FIRST and _DIR, where the tensorboard trace handler writes.
PROFILER_PREFIX = {"attention": "AFD_GPU_ATTENTION_PROFILER", "ffn": "AFD_GPU_FFN_PROFILER"}
# A native case's profiler is vLLM's own (``--profiler-config``); its trace folder is named in argv, where the runner
# puts the results folder in for this placeholder (a shell variable, so ``afd-e2e plan``'s text stays paste-able).
OUT_DIR = "${AFD_E2E_OUT}"
PROFILER_FLAG = "--profiler-config"
# Flags a graph case sets itself; whatever the engine's serve_args say about them gives way.
GRAPH_FLAGS = (
    "--enforce-eager",
    "--max-num-seqs",
    "--max-num-batched-tokens",
    "--max-cudagraph-capture-size",
    "--cudagraph-capture-sizes",
    "--compilation-config",
)
DBO_FLAGS = ("--enable-dbo", "--dbo-decode-token-threshold", "--dbo-prefill-token-threshold")
# What the AFD plugin's own MRV2 cases pass besides VLLM_USE_V2_MODEL_RUNNER=1 (its tests/e2e/runner.py,
# build_vllm_command: ../shared/reference/afd-plugin-now.md), the plugin's requirement for AFD on ModelRunnerV2:
# each flag and the opposite an engine's serve_args may hold. A native server on V2 needs none (the 12-05 and 12-06
# GPU runs: native V2 started and was proven without them).
MRV2_AFD_FLAGS = (
    ("--no-enable-prefix-caching", "--enable-prefix-caching"),
    ("--no-enable-chunked-prefill", "--enable-chunked-prefill"),
    ("--no-async-scheduling", "--async-scheduling"),
)
# A DBO case's roles that schedule batches (a native server, Attention) log each step's micro-batches at DEBUG: the
# evidence that DBO split them (execution/dbo.py). The FFN role logs none, and no other case pays for the lines.
DBO_LOG_ENV = {"VLLM_LOGGING_LEVEL": "DEBUG"}
DBO_LOGGED_ROLES = ("server", "attention")


@dataclass(frozen=True)
class DpSpan:
    """One agent's share of a role whose DP ranks span ``nodes`` agents (vLLM's multi-node data parallel): node 0
    serves the API and hosts the DP coordinator at ``address``:``rpc_port``; the others run ``--headless``."""

    node: int
    nodes: int
    address: str  # node 0's address as this node reaches it
    rpc_port: int


def topology_args(role: RoleSpec, span: DpSpan | None = None) -> list[str]:
    args = ["--data-parallel-size", str(role.dp)]
    if span is not None:
        local = role.dp // span.nodes
        args += ["--data-parallel-size-local", str(local), "--data-parallel-start-rank", str(span.node * local)]
        args += ["--data-parallel-address", span.address, "--data-parallel-rpc-port", str(span.rpc_port)]
        if span.node > 0:
            args.append("--headless")
    args += ["--tensor-parallel-size", str(role.tp)]
    if role.ep:
        args.append("--enable-expert-parallel")
    return args


def afd_config(role: str, case: CaseSpec, host: str, port: int) -> str:
    """The plugin's ``additional_config["afd"]``: the common fields, those the connector's traits need set
    (``async``), and the case's ``connector_extra_config`` when it has one."""
    assert case.attention and case.ffn and case.connector_traits
    afd = {
        "role": role,
        "connector": case.connector,
        "host": host,
        "port": port,
        "num_attention_ranks": case.attention.ranks,
        "num_ffn_ranks": case.ffn.ranks,
        **case.connector_traits.config,
    }
    if case.connector_extra_config:
        afd["connector_extra_config"] = dict(case.connector_extra_config)
    return json.dumps({"afd": afd}, separators=(",", ":"))


def graph_args(graph: GraphSpec) -> list[str]:
    """FULL_DECODE_ONLY CUDA graphs at one capture size, which also bounds the sequences and tokens per step."""
    size = graph.capture_size
    return [
        f"--max-num-seqs={size}",
        f"--max-num-batched-tokens={size}",
        f"--max-cudagraph-capture-size={size}",
        f"--cudagraph-capture-sizes={size}",
        "--compilation-config=" + json.dumps({"cudagraph_mode": "FULL_DECODE_ONLY"}, separators=(",", ":")),
    ]


def remove_flag(args: list[str], flag: str) -> list[str]:
    """``args`` without ``flag``, whether written ``--flag=value``, ``--flag value`` or ``--flag`` alone."""
    out: list[str] = []
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
            if not arg.startswith("-"):
                continue
        if arg == flag:
            skip_value = True
        elif not arg.startswith(flag + "="):
            out.append(arg)
    return out


def profiler_env(role_name: str, spec: ProfilerSpec) -> dict[str, str]:
    """The schedule variables of one AFD role's profiler (its folder is set by ``profiler_dir_env``)."""
    prefix = PROFILER_PREFIX[role_name]
    return {
        f"{prefix}_ENABLE": "true",
        f"{prefix}_WAIT": str(spec.wait),
        f"{prefix}_WARMUP": str(spec.warmup),
        f"{prefix}_ACTIVE": str(spec.active),
        f"{prefix}_REPEAT": str(spec.repeat),
        f"{prefix}_SKIP_FIRST": str(spec.skip_first),
    }


def trace_dir(case_id: str, role_name: str) -> str:
    """Where a role's profiler writes, relative to the run's results folder: ``traces/<case>/<role>``
    (``server`` for a native case)."""
    return f"traces/{case_id}/{role_name}"


def profiler_dir_env(case: CaseSpec, role_name: str) -> dict[str, str]:
    """``<prefix>_DIR`` as a folder relative to the run's results folder: ``traces/<case>/<role>``."""
    if case.profiler is None or role_name not in PROFILER_PREFIX:
        return {}
    return {f"{PROFILER_PREFIX[role_name]}_DIR": trace_dir(case.id, role_name)}


def native_profiler_args(case: CaseSpec) -> list[str]:
    """vLLM's own torch profiler on a native server, started and stopped by the profiler phase (``/start_profile``,
    ``/stop_profile``); the spec's schedule maps to vLLM's iterations (wait and warmup 0: every step between start
    and stop). No Python stacks and no front-end trace: the traces stay small, and only the engine's steps count."""
    spec = case.profiler
    assert spec is not None
    config = {
        "profiler": "torch",
        "torch_profiler_dir": f"{OUT_DIR}/{trace_dir(case.id, 'server')}",
        "torch_profiler_with_stack": False,
        "ignore_frontend": True,
        "wait_iterations": spec.wait,
        "warmup_iterations": spec.warmup,
        "active_iterations": spec.active,
    }
    return [f"{PROFILER_FLAG}=" + json.dumps(config, separators=(",", ":"))]


def flight_recorder_env(case: CaseSpec) -> dict[str, str]:
    """PyTorch's NCCL flight recorder: record the last collectives and dump them when one times out."""
    if case.nccl_flight_recorder is None:
        return {}
    return {
        "TORCH_NCCL_TRACE_BUFFER_SIZE": str(case.nccl_flight_recorder.buffer_size),
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
    }


def flight_recorder_dump_env(case: CaseSpec, role_name: str) -> dict[str, str]:
    """Where the recorder dumps (PyTorch appends the rank): ``forensics/<case>/nccl/<role>-rank``, relative to the
    run's results folder, so the dumps are uploaded with the case's forensics."""
    if case.nccl_flight_recorder is None:
        return {}
    return {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": f"forensics/{case.id}/nccl/{role_name}-rank"}


def serve_argv(
    profile: Profile,
    case: CaseSpec,
    role_name: str,
    model_path: str,
    api_port: int,
    connector_port: int | None,
    *,
    listen_host: str | None = None,
    connector_host: str | None = None,
    span: DpSpan | None = None,
    vllm_version: str | None = None,
) -> list[str]:
    """Full argv for one role of a case (one agent's share of it with ``span``). The API listens on
    ``listen_host`` and the AFD connector's rendezvous is at ``connector_host`` (both ``engine.host`` unless the
    case's roles run on several agents: plan/addresses.py). ``vllm_version`` is the vLLM that will run it; None (not
    known) leaves out every flag that exists only from some version."""
    engine = profile.engine
    role = case.roles()[role_name]
    served = profile.model.served_name if role_name != "ffn" else f"{profile.model.served_name}-ffn"
    argv = [engine.executable, "serve", model_path, "--served-model-name", served]
    argv += ["--host", listen_host or engine.host, "--port", str(api_port)]
    argv += list(engine.serve_args)
    argv += topology_args(role, span)
    if case.kind == "afd":
        assert connector_port is not None
        host = connector_host or engine.host
        argv += ["--additional-config", afd_config(role_name, case, host, connector_port)]
    args = argv[3:]
    if case.graph is not None:
        for flag in GRAPH_FLAGS:
            args = remove_flag(args, flag)
        args += graph_args(case.graph)
    if case.dbo is not None:
        for flag in DBO_FLAGS:
            args = remove_flag(args, flag)
        args += [
            "--enable-dbo",
            f"--dbo-decode-token-threshold={case.dbo.decode_token_threshold}",
            f"--dbo-prefill-token-threshold={case.dbo.prefill_token_threshold}",
        ]
    if case.profiler is not None and case.kind == "native":
        args = remove_flag(args, PROFILER_FLAG) + native_profiler_args(case)
    if case.kind == "afd" and profile.model_runner(case) == "v2":
        for flag, opposite in MRV2_AFD_FLAGS:
            args = [*remove_flag(remove_flag(args, flag), opposite), flag]
    if vllm_version is not None and has_flag(vllm_version, SHUTDOWN_TIMEOUT):
        args = [*remove_flag(args, SHUTDOWN_TIMEOUT), f"{SHUTDOWN_TIMEOUT}={shutdown_timeout_s(profile)}"]
    for edit in case.edits:
        if edit.applies_to(role_name):
            for flag in edit.remove_args:
                args = remove_flag(args, flag)
            args += edit.add_args
    return argv[:3] + args


def child_env(
    profile: Profile, case: CaseSpec, role_name: str, devices: tuple[int, ...], interface: str | None = None
) -> dict[str, str]:
    """Variables set on a child (on top of the agent's environment minus ``engine.env_strip``); a variable an
    edit removes is neither set nor inherited (``ProcessPlan.env_unset``). With ``interface`` (a case whose roles
    run on several agents: that agent pool's), NCCL and Gloo talk over that interface only."""
    env = dict(OFFLINE_ENV)
    env.update(profile.engine.env_set)
    if interface is not None:
        env["NCCL_SOCKET_IFNAME"] = interface
        env["GLOO_SOCKET_IFNAME"] = interface
    if case.kind == "afd":
        env.update(AFD_ENV)
    if (runner := RUNNER_ENV.get(profile.model_runner(case))) is not None:
        env[MODEL_RUNNER_ENV] = runner
    if profile.platform == "cuda":
        # Number GPUs as NVML and nvidia-smi do, so the ids preflight checked are the ids the children use.
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in devices)
    if case.profiler is not None and role_name in PROFILER_PREFIX:
        env.update(profiler_env(role_name, case.profiler))
    env.update(flight_recorder_env(case))
    if case.dbo is not None and role_name in DBO_LOGGED_ROLES:
        env.update(DBO_LOG_ENV)
    for edit in case.edits:
        if edit.applies_to(role_name):
            for name in edit.env_remove:
                env.pop(name, None)
            env.update(edit.env_set)
    return env


def removed_env(profile: Profile, case: CaseSpec, role_name: str) -> tuple[str, ...]:
    """Variables the case's edits remove from one role and do not set again afterwards, and the runner variable
    where the case leaves the runner to vLLM (``auto``: the agent's own value must not choose it)."""
    removed: dict[str, None] = {MODEL_RUNNER_ENV: None} if profile.model_runner(case) not in RUNNER_ENV else {}
    for edit in case.edits:
        if edit.applies_to(role_name):
            removed.update(dict.fromkeys(edit.env_remove))
            for name in edit.env_set:
                removed.pop(name, None)
    return tuple(removed)


def shutdown_timeout_s(profile: Profile) -> int:
    """How long vLLM may drain its requests on SIGTERM: ``budgets.drain_s``, or half the teardown budget, in whole
    seconds (vLLM's type), at least 1. vLLM drains for that long and then waits on its own processes to stop; the
    runner SIGKILLs at ``teardown_s``, and a SIGKILL is a hygiene failure, so the rest is left for vLLM's shutdown."""
    if profile.budgets.drain_s is not None:
        return profile.budgets.drain_s
    return max(1, int(profile.budgets.teardown_s / 2))
