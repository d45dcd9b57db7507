"""Golden plan of the seed profile: argv and environment of every process, launch order, ports, loads."""

from __future__ import annotations

import json

from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile

MODEL = "/models/Qwen3.5-122B-A10B"
DEVICES = (0, 2, 4, 6, 1, 3, 5, 7)
COMMON = [
    "--dtype=bfloat16",
    "--language-model-only",
    "--max-model-len=4096",
    "--max-num-seqs=1",
    "--max-num-batched-tokens=4096",
    "--mamba-cache-mode=align",
    "--all2all-backend=allgather_reducescatter",
    "--seed=0",
    "--enforce-eager",
]
BASE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "PYTHONUNBUFFERED": "1",
    "VLLM_USE_FLASHINFER_SAMPLER": "0",
    "VLLM_ENGINE_READY_TIMEOUT_S": "18000",
    "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
}
FORCED_ROUTING = {
    "VLLM_MOE_ROUTING_SIMULATION_STRATEGY",
    "AFD_BENCHMARK_FORCE_LB_TOPN_PER_RANK",
    "AFD_BENCHMARK_FORCE_LOAD_BALANCE",
}


def serve(port: int, name: str = "qwen3.5-122b-a10b") -> list[str]:
    return ["vllm", "serve", MODEL, "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port), *COMMON]


def afd_config(role: str) -> str:
    return (
        f'{{"afd":{{"role":"{role}","connector":"P2pNcclAFDConnector","host":"127.0.0.1","port":18022,'
        '"num_attention_ranks":4,"num_ffn_ranks":4}}'
    )


def plan():
    return build_plan(load_profile("qwen3.5-122b-a10b"), model_path=MODEL, devices=DEVICES)


def test_five_cases_five_loads_in_profile_order():
    p = plan()
    assert [c.id for c in p.cases] == [
        "baseline-eager",
        "afd-eager-4a4f",
        "native-eager-dp8",
        "native-dp8-serving",
        "afd-4a4f-serving",
    ]
    assert p.model_loads == 5
    assert [c.phases for c in p.cases] == [
        ("smoke", "correctness"),
        ("smoke", "correctness", "performance"),
        ("smoke", "performance"),
        ("smoke", "capacity"),
        ("smoke", "capacity"),
    ]


def test_baseline_eager_native_dp4_ep4_on_attention_devices():
    (server,) = plan().case("baseline-eager").processes
    expected = [*serve(18000), "--data-parallel-size", "4", "--tensor-parallel-size", "1", "--enable-expert-parallel"]
    assert list(server.argv) == expected
    # the profile's model runner (V1 by default) on the baseline too, so native and AFD compare one runner
    assert server.env_set == {**BASE_ENV, "VLLM_USE_V2_MODEL_RUNNER": "0", "CUDA_VISIBLE_DEVICES": "0,2,4,6"}
    assert server.devices == (0, 2, 4, 6) and server.serves_api


def test_afd_4a4f_launches_ffn_before_attention():
    case = plan().case("afd-eager-4a4f")
    ffn, attention = case.processes
    assert (ffn.name, attention.name) == ("ffn", "attention")
    topology = ["--data-parallel-size", "4", "--tensor-parallel-size", "1", "--enable-expert-parallel"]
    assert list(ffn.argv) == [
        *serve(18021, "qwen3.5-122b-a10b-ffn"),
        *topology,
        "--additional-config",
        afd_config("ffn"),
    ]
    assert list(attention.argv) == [*serve(18020), *topology, "--additional-config", afd_config("attention")]
    afd_env = {**BASE_ENV, "VLLM_PLUGINS": "afd", "VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert ffn.env_set == {**afd_env, "CUDA_VISIBLE_DEVICES": "1,3,5,7"}
    assert attention.env_set == {**afd_env, "CUDA_VISIBLE_DEVICES": "0,2,4,6"}
    assert ffn.connector_ports == (18022, 18023, 18024, 18025, 18026)  # rendezvous + one per FFN rank
    assert attention.serves_api and not ffn.serves_api
    assert case.ready_url == "http://127.0.0.1:18020/v1/models"


def test_native_dp8_on_all_eight():
    (server,) = plan().case("native-eager-dp8").processes
    assert list(server.argv)[-5:] == [
        "--data-parallel-size",
        "8",
        "--tensor-parallel-size",
        "1",
        "--enable-expert-parallel",
    ]
    assert server.env_set["CUDA_VISIBLE_DEVICES"] == "0,2,4,6,1,3,5,7"


def test_children_never_inherit_forced_routing():
    for case in plan().cases:
        for process in case.processes:
            assert set(process.env_unset) >= FORCED_ROUTING
            assert not FORCED_ROUTING & set(process.env_set)


def test_ports_never_overlap_between_processes_or_cases():
    ports = [port for case in plan().cases for port in case.ports]
    assert len(ports) == len(set(ports))


def test_device_order_follows_the_gate():
    p = build_plan(load_profile("qwen3.5-122b-a10b"), model_path=MODEL, devices=(7, 6, 5, 4, 3, 2, 1, 0))
    ffn, attention = p.case("afd-eager-4a4f").processes
    assert ffn.devices == (3, 2, 1, 0) and attention.devices == (7, 6, 5, 4)


def test_json_form_round_trips():
    data = json.loads(json.dumps(plan().to_dict()))
    assert data["model_loads"] == 5
    assert data["cases"][1]["processes"][0]["argv"][-1] == afd_config("ffn")


def test_case_selection_and_port_base():
    p = build_plan(
        load_profile("qwen3.5-122b-a10b"),
        model_path=MODEL,
        devices=DEVICES,
        case_ids=["afd-eager-4a4f"],
        port_base=30000,
    )
    assert [c.id for c in p.cases] == ["afd-eager-4a4f"] and p.model_loads == 1
    assert p.comparisons == ()
    # Selected alone, a case keeps the port block it has in the whole run (a follower plans its case alone).
    whole = build_plan(load_profile("qwen3.5-122b-a10b"), model_path=MODEL, devices=DEVICES, port_base=30000)
    assert p.cases[0].base_url == whole.case("afd-eager-4a4f").base_url != "http://127.0.0.1:30000"
    assert p.cases[0].processes == whole.case("afd-eager-4a4f").processes
