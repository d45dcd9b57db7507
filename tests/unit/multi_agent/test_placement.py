"""Placement in profiles: a role on another agent pool, read and validated on load, and planned per agent."""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from afd_e2e.errors import UsageError
from afd_e2e.plan import build_plan
from afd_e2e.plan.addresses import fill_addresses, meta_data_key, placeholders
from afd_e2e.plan.shell_text import render_text
from afd_e2e.profile import load_profile, parse_profile
from repo_paths import REPO

PROFILES = REPO / "python" / "afd_e2e" / "profiles"
MODEL = "/models/q"


def document(name: str) -> dict:
    return yaml.safe_load((PROFILES / f"{name}.yaml").read_text())


def error(name: str, mutate) -> str:
    doc = copy.deepcopy(document(name))
    mutate(doc)
    with pytest.raises(UsageError) as exc:
        parse_profile(doc, f"{name}.yaml")
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_the_examples_load_with_their_placement():
    tiny = load_profile("tiny-cpu-two-agents")
    (case,) = tiny.cases
    assert tiny.multi_agent and case.multi_agent
    server = case.placement["server"]
    assert (dict(server.agents), server.interface, server.listen, server.nodes) == (
        {"queue": "afd-e2e-cpu-follower"},
        "lo",
        "127.0.0.1",
        1,
    )
    seed = load_profile("qwen3.5-122b-a10b-two-agents")
    assert [c.id for c in seed.cases if c.multi_agent] == ["afd-8a8f", "afd-16a8f"]
    assert seed.case("afd-16a8f").placement["attention"].nodes == 2
    assert not load_profile("tiny-cpu").multi_agent


def _place(case: str, role: str, **changes):
    def mutate(doc):
        doc["cases"][case].setdefault("placement", {}).setdefault(role, {}).update(changes)

    return mutate


@pytest.mark.parametrize(
    ("name", "mutate", "expected"),
    [
        (
            "tiny-cpu-two-agents",
            lambda d: d["cases"]["cpu-tp1-remote"]["placement"].update(ffn={"agents": {"queue": "x"}}),
            "cases.cpu-tp1-remote.placement.ffn: no role 'ffn' in this case",
        ),
        (
            "tiny-cpu-two-agents",
            lambda d: d["cases"]["cpu-tp1-remote"]["placement"]["server"].pop("agents"),
            "placement.server.agents: missing (fix: name the pool's agent tags",
        ),
        (
            "tiny-cpu-two-agents",
            _place("cpu-tp1-remote", "server", agents={}),
            "placement.server.agents: names no agent tags",
        ),
        (
            "tiny-cpu-two-agents",
            lambda d: d["cases"]["cpu-tp1-remote"]["placement"]["server"].pop("interface"),
            "placement.server.interface: missing (fix: name the pool's network interface",
        ),
        (
            "tiny-cpu-two-agents",
            _place("cpu-tp1-remote", "server", listen="0.0.0.0"),
            "placement.server.listen: listens on every interface (fix: remove listen (the address of lo))",
        ),
        (
            "tiny-cpu-two-agents",
            _place("cpu-tp1-remote", "server", nodes=2),
            "placement.server.nodes: a role spanning agents needs vLLM's data parallel; the CPU backend has none",
        ),
        (
            "tiny-cpu-two-agents",
            _place("cpu-tp1-remote", "server", devices=[0]),
            "placement.server.devices: a cpu profile has no devices",
        ),
        (
            "tiny-cpu-two-agents",
            _place("cpu-tp1-remote", "server", colour="blue"),
            "placement.server.colour: unknown key",
        ),
        (
            "tiny-cpu-two-agents",
            lambda d: d["engine"].pop("interface"),
            "engine.interface: case cpu-tp1-remote places a role on another agent, and the leader's network "
            "interface is not named",
        ),
        (
            "qwen3.5-122b-a10b-two-agents",
            _place("afd-8a8f", "ffn", devices=[0, 1, 2, 3]),
            "placement.ffn.devices: lists 4 devices, each agent runs 8 ranks (DP8 x TP1 over 1 agent(s))",
        ),
        (
            "qwen3.5-122b-a10b-two-agents",
            _place("afd-8a8f", "ffn", devices=[0, 0, 1, 2, 3, 4, 5, 6]),
            "placement.ffn.devices: must be unique device ids",
        ),
        (
            "qwen3.5-122b-a10b-two-agents",
            _place("afd-16a8f", "attention", nodes=3),
            "placement.attention.nodes: DP16 does not split over 3 agents",
        ),
        (
            "qwen3.5-122b-a10b-two-agents",
            lambda d: d["cases"]["afd-8a8f"]["ffn"].update(devices="all"),
            "cases.afd-8a8f.ffn.devices: a placed role's devices are on its own agent (fix: remove it and set "
            "cases.afd-8a8f.placement.ffn.devices)",
        ),
    ],
)
def test_bad_placement_is_one_line_naming_the_key_and_the_fix(name, mutate, expected):
    assert expected in error(name, mutate)


def test_a_variant_inherits_replaces_or_drops_the_placement():
    doc = document("qwen3.5-122b-a10b-two-agents")
    doc["cases"]["afd-8a8f-same"] = {"extends": "afd-8a8f"}
    doc["cases"]["afd-8a8f-elsewhere"] = {
        "extends": "afd-8a8f",
        "placement": {"ffn": {"agents": {"queue": "other"}, "interface": "ib0", "devices": list(range(8))}},
    }
    doc["cases"]["afd-8a8f-local"] = {
        "extends": "afd-8a8f",
        "placement": None,
        "attention": {"devices": "a", "dp": 4},
        "ffn": {"devices": "f", "dp": 4},
    }
    doc["devices"]["groups"].update(a=[0, 4], f=[4, 8])
    profile = parse_profile(doc, "x.yaml")
    assert profile.case("afd-8a8f-same").placement == profile.case("afd-8a8f").placement
    assert profile.case("afd-8a8f-elsewhere").placement["ffn"].interface == "ib0"
    assert not profile.case("afd-8a8f-local").multi_agent


def test_a_native_server_on_a_follower_listens_where_the_profile_says_and_the_leader_reaches_it_by_meta_data():
    plan = build_plan(load_profile("tiny-cpu-two-agents"), model_path=MODEL)
    (case,) = plan.cases
    (server,) = case.processes
    assert case.remote_processes == (server,) and case.leader_processes == ()
    assert server.placement.agent_tags == {"queue": "afd-e2e-cpu-follower"}
    argv = list(server.argv)
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert server.env_set["NCCL_SOCKET_IFNAME"] == server.env_set["GLOO_SOCKET_IFNAME"] == "lo"
    assert case.base_url == "http://${AFD_E2E_HOST_SERVER}:18600"
    assert case.rendezvous == {"AFD_E2E_HOST_SERVER": "cpu-tp1-remote/server/host"}
    assert meta_data_key("job-7", case.rendezvous["AFD_E2E_HOST_SERVER"]) == "afd-e2e/job-7/cpu-tp1-remote/server/host"
    assert fill_addresses(case.ready_url, {"AFD_E2E_HOST_SERVER": "10.0.0.2"}) == "http://10.0.0.2:18600/v1/models"


def test_a_single_agent_plan_is_unchanged_by_placement():
    """No interface variables, no placeholders: the seed's golden plan test pins the rest."""
    plan = build_plan(load_profile("qwen3.5-122b-a10b"), model_path=MODEL)
    for case in plan.cases:
        assert case.rendezvous == {} and case.remote_processes == ()
        for process in case.processes:
            assert "NCCL_SOCKET_IFNAME" not in process.env_set
            assert not any(placeholders(arg) for arg in process.argv)


def _flag(argv, flag):
    argv = list(argv)
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_afd_ffn_on_a_follower_owns_the_rendezvous_and_attention_finds_it_in_meta_data():
    plan = build_plan(load_profile("qwen3.5-122b-a10b-two-agents"), model_path=MODEL, case_ids=["afd-8a8f"])
    (case,) = plan.cases
    ffn, attention = case.processes
    assert ffn.placement is not None and attention.placement is None
    # Every process listens on its own agent's interface address, never on all interfaces.
    assert _flag(ffn.argv, "--host") == _flag(attention.argv, "--host") == "${AFD_E2E_LISTEN_HOST}"
    assert '"host":"${AFD_E2E_LISTEN_HOST}"' in _flag(ffn.argv, "--additional-config")
    assert '"host":"${AFD_E2E_HOST_FFN}"' in _flag(attention.argv, "--additional-config")
    assert case.rendezvous == {"AFD_E2E_HOST_FFN": "afd-8a8f/ffn/host"}
    assert ffn.devices == tuple(range(8)) and ffn.env_set["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    assert ffn.env_set["NCCL_SOCKET_IFNAME"] == attention.env_set["NCCL_SOCKET_IFNAME"] == "eth0"
    assert case.base_url == "http://${AFD_E2E_LISTEN_HOST}:18220"  # the API is on the leader (2nd case: 2nd block)


def test_a_role_spanning_two_agents_is_planned_per_agent_with_vllm_multi_node_dp():
    plan = build_plan(load_profile("qwen3.5-122b-a10b-two-agents"), model_path=MODEL, case_ids=["afd-16a8f"])
    (case,) = plan.cases
    assert [p.name for p in case.processes] == ["ffn", "attention", "attention-node1"]
    ffn, first, second = case.processes
    assert ffn.placement is None
    assert [(p.placement.node, p.placement.nodes) for p in (first, second)] == [(0, 2), (1, 2)]
    for process, start in ((first, "0"), (second, "8")):
        assert _flag(process.argv, "--data-parallel-size") == "16"
        assert _flag(process.argv, "--data-parallel-size-local") == "8"
        assert _flag(process.argv, "--data-parallel-start-rank") == start
        assert '"num_attention_ranks":16,"num_ffn_ranks":8' in _flag(process.argv, "--additional-config")
    rpc = _flag(first.argv, "--data-parallel-rpc-port")
    assert rpc == _flag(second.argv, "--data-parallel-rpc-port") and int(rpc) in first.connector_ports
    assert _flag(first.argv, "--data-parallel-address") == "${AFD_E2E_LISTEN_HOST}"
    assert _flag(second.argv, "--data-parallel-address") == "${AFD_E2E_HOST_ATTENTION}"
    assert "--headless" in second.argv and "--headless" not in first.argv
    assert first.serves_api and not second.serves_api
    assert case.base_url == "http://${AFD_E2E_HOST_ATTENTION}:18240"
    assert set(case.rendezvous) == {"AFD_E2E_HOST_ATTENTION", "AFD_E2E_HOST_FFN"}


def test_a_follower_planning_its_case_alone_listens_where_the_leaders_whole_run_expects_it():
    # The follower (join --follow CASE/PROCESS) plans its case alone; the leader plans every case of the profile.
    # The first device run of a two-case profile found them 20 ports apart: the leader waited out its start-up.
    profile = load_profile("qwen3.5-122b-a10b-two-agents")
    whole = build_plan(profile, model_path=MODEL, port_base=21000)
    placed = [case for case in whole.cases if case.remote_processes]
    assert placed and any(whole.cases.index(case) > 0 for case in placed)
    for case in placed:
        (alone,) = build_plan(profile, model_path=MODEL, case_ids=[case.id], port_base=21000).cases
        assert (alone.processes, alone.base_url, alone.ready_url) == (case.processes, case.base_url, case.ready_url)


def test_plan_text_says_which_agent_runs_which_process_and_stays_paste_able(tmp_path: Path):
    plan = build_plan(load_profile("qwen3.5-122b-a10b-two-agents"), model_path=MODEL, case_ids=["afd-16a8f"])
    text = render_text(plan)
    assert "# 1. ffn (devices 0,1,2,3,4,5,6,7, on the leader's agent)" in text
    assert (
        "# 3. attention-node1 (devices 0,1,2,3,4,5,6,7, in a follower job on an agent with gpus=8,queue=large-model"
        in text
    )
    assert "(interface eth0, node 2 of 2)" in text
    assert "afd-e2e/<leader job>/afd-16a8f/ffn/host" in text
    # The shell expands the address placeholders, also inside the AFD config's JSON, and nothing else.
    line = next(line for line in text.splitlines() if "attention-node1" not in line and "--headless" in line)
    argv_text = line.split("setsid ", 1)[1]
    script = tmp_path / "print.sh"
    script.write_text(f"printf '%s\\n' {argv_text}\n")
    printed = subprocess.run(
        ["bash", str(script)],
        env={"AFD_E2E_LISTEN_HOST": "10.0.0.5", "AFD_E2E_HOST_ATTENTION": "10.0.0.4", "AFD_E2E_HOST_FFN": "10.0.0.3"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    (second,) = [p for p in plan.cases[0].processes if p.name == "attention-node1"]
    values = {"AFD_E2E_LISTEN_HOST": "10.0.0.5", "AFD_E2E_HOST_ATTENTION": "10.0.0.4", "AFD_E2E_HOST_FFN": "10.0.0.3"}
    assert printed == [fill_addresses(arg, values) for arg in second.argv]


def test_an_address_without_a_value_is_a_one_line_error():
    with pytest.raises(UsageError, match="no address for AFD_E2E_HOST_FFN"):
        fill_addresses('{"host":"${AFD_E2E_HOST_FFN}"}', {"AFD_E2E_LISTEN_HOST": "1.2.3.4"})
    assert fill_addresses("${AFD_GPU_E2E_MODEL}", {}) == "${AFD_GPU_E2E_MODEL}"  # not an address: left alone


def test_run_refuses_a_case_placed_on_another_agent_outside_a_buildkite_job(tmp_path: Path):
    """Its agents meet through this build's meta-data, below the leader's job id: without a job there is none."""
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "BUILDKITE_JOB_ID"}
    done = subprocess.run(
        [
            "afd-e2e",
            "run",
            "--profile",
            "tiny-cpu-two-agents",
            "--model",
            str(model_folder(tmp_path)),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 2, done.stderr
    assert "places roles on other agents (placement)" in done.stderr
    assert "BUILDKITE_JOB_ID is not set" in done.stderr and "--case" in done.stderr
    assert not out.exists()


def model_folder(tmp_path: Path) -> Path:
    """A checkpoint folder: admission reads its config.json before it looks at placement."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "qwen3"}')
    return folder
