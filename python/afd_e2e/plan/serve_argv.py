"""Where ``vllm serve`` argv and child environments are built, for native and AFD (XAYF) roles.

Follows the upstream AFD runner: every role gets DP/TP sizes and expert parallel; AFD roles get an
``--additional-config`` with the connector, rendezvous host/port and rank counts; Attention serves the API on the
case's port, FFN on the next one.
"""

from __future__ import annotations

import json

from afd_e2e.profile import CaseSpec, Profile, RoleSpec

# Set on every child: no hub access, no telemetry, unbuffered logs so progress lines arrive in time.
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "PYTHONUNBUFFERED": "1",
}
AFD_ENV = {"VLLM_PLUGINS": "afd", "VLLM_USE_V2_MODEL_RUNNER": "0"}


def topology_args(role: RoleSpec) -> list[str]:
    args = ["--data-parallel-size", str(role.dp), "--tensor-parallel-size", str(role.tp)]
    if role.ep:
        args.append("--enable-expert-parallel")
    return args


def afd_config(role: str, case: CaseSpec, host: str, port: int) -> str:
    assert case.attention and case.ffn
    config = {
        "afd": {
            "role": role,
            "connector": case.connector,
            "host": host,
            "port": port,
            "num_attention_ranks": case.attention.ranks,
            "num_ffn_ranks": case.ffn.ranks,
        }
    }
    return json.dumps(config, separators=(",", ":"))


def serve_argv(
    profile: Profile,
    case: CaseSpec,
    role_name: str,
    model_path: str,
    api_port: int,
    connector_port: int | None,
) -> list[str]:
    """Full argv for one role of a case."""
    engine = profile.engine
    role = case.roles()[role_name]
    served = profile.model.served_name if role_name != "ffn" else f"{profile.model.served_name}-ffn"
    argv = [engine.executable, "serve", model_path, "--served-model-name", served]
    argv += ["--host", engine.host, "--port", str(api_port)]
    argv += list(engine.serve_args)
    argv += topology_args(role)
    if case.kind == "afd":
        assert connector_port is not None
        argv += ["--additional-config", afd_config(role_name, case, engine.host, connector_port)]
    argv += list(case.extra_args)
    return argv


def child_env(profile: Profile, case: CaseSpec, devices: tuple[int, ...]) -> dict[str, str]:
    """Variables set on a child (on top of the agent's environment minus ``engine.env_strip``)."""
    env = dict(OFFLINE_ENV)
    env.update(profile.engine.env_set)
    if case.kind == "afd":
        env.update(AFD_ENV)
    if profile.platform == "cuda":
        # Number GPUs as NVML and nvidia-smi do, so the ids preflight checked are the ids the children use.
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in devices)
    env.update(case.env_set)
    return env
