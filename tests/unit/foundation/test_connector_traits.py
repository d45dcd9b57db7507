"""Unit tier: the AFD connectors' traits (``profile/connectors.py``) on the shipped profiles' documents: the plan
launches an attention-first connector's Attention first with the rendezvous at its rank 0, passes the AFD config
fields its traits need and the case's ``connector_extra_config``; an unknown connector or extra key is refused in
one line naming what is known; a profile may declare a new connector's traits."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml

from afd_e2e.cli import main
from afd_e2e.errors import UsageError
from afd_e2e.plan.build import build_plan
from afd_e2e.profile import parse_profile
from afd_e2e.profile.connectors import KNOWN
from repo_paths import REPO

PROFILES = REPO / "python/afd_e2e/profiles"


def tiny_gpu(**afd_case: object) -> dict:
    """tiny-gpu-1a1f's document with its AFD case changed."""
    doc = yaml.safe_load((PROFILES / "tiny-gpu-1a1f.yaml").read_text())
    doc["cases"]["afd-1a1f"].update(afd_case)
    return doc


def plan_text(capsys, tmp_path, doc: dict) -> str:
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(doc))
    # for the GPU kit's vLLM, whatever vLLM this machine has (the unit tier asks none: the lowest-versions pass sees
    # the engine venv's)
    code = main(["plan", "--profile", str(path), "--case", "afd-1a1f", "--model", "/m", "--vllm-version", "0.26.0"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def additional_config(out: str, role: str) -> dict:
    """The AFD config a role's pasted command passes."""
    (line,) = [line for line in out.splitlines() if f'"role":"{role}"' in line]
    argv = shlex.split(line.removeprefix("  setsid ").removesuffix(" &"))
    return json.loads(argv[argv.index("--additional-config") + 1])["afd"]


def test_an_attention_first_connector_launches_attention_first_with_its_async_fields(capsys, tmp_path):
    out = plan_text(capsys, tmp_path, tiny_gpu(connector="GpuAsyncAFDConnector"))
    assert out.index("# 1. attention (devices 0)") < out.index("# 2. ffn (devices 1)")
    last = out.rstrip().splitlines()[-1]
    assert '"role":"ffn"' in last and not last.endswith("&")  # the last command (FFN) is the foreground one
    attention = additional_config(out, "attention")
    assert attention["connector"] == "GpuAsyncAFDConnector"
    assert (attention["async"], attention["compute_gate_on_attention"]) == (True, True)
    assert "connector_extra_config" not in attention


def test_the_synchronous_p2p_connector_still_launches_ffn_first_without_async(capsys, tmp_path):
    out = plan_text(capsys, tmp_path, tiny_gpu())
    assert out.index("# 1. ffn (devices 1)") < out.index("# 2. attention (devices 0)")
    assert set(additional_config(out, "ffn")) == {
        "role",
        "connector",
        "host",
        "port",
        "num_attention_ranks",
        "num_ffn_ranks",
    }


def test_the_rendezvous_ports_belong_to_the_connectors_rendezvous_role():
    for connector, owner in (("P2pNcclAFDConnector", "ffn"), ("CAMAsyncAFDConnector", "attention")):
        profile = parse_profile(tiny_gpu(connector=connector), "tiny.yaml")
        (case,) = build_plan(profile, model_path="/m", case_ids=["afd-1a1f"]).cases
        owners = [p.name for p in case.processes if p.connector_ports]
        assert owners == [owner], connector


@pytest.mark.parametrize(
    ("connector", "order", "owner"),
    [("P2pNcclAFDConnector", ["ffn", "attention"], "FFN"), ("CAMAsyncAFDConnector", ["attention", "ffn"], "ATTENTION")],
)
def test_across_agents_both_roles_meet_at_the_rendezvous_roles_rank_0(connector, order, owner):
    doc = yaml.safe_load((PROFILES / "qwen3.5-122b-a10b-two-agents.yaml").read_text())
    doc["cases"]["afd-8a8f"]["connector"] = connector  # Attention on the leader, FFN on a follower
    (case,) = build_plan(parse_profile(doc, "two-agents.yaml"), model_path="/m", case_ids=["afd-8a8f"]).cases
    assert [p.name for p in case.processes] == order
    hosts = {p.name: json.loads(p.argv[p.argv.index("--additional-config") + 1])["afd"]["host"] for p in case.processes}
    other = "attention" if owner == "FFN" else "ffn"
    assert hosts[owner.lower()] == "${AFD_E2E_LISTEN_HOST}"  # its own listen address: it hosts the rendezvous
    assert hosts[other] == f"${{AFD_E2E_HOST_{owner}}}"  # the other agent reaches it through build meta-data
    assert set(case.rendezvous) == {f"AFD_E2E_HOST_{owner}"}


def test_connector_extra_config_is_passed_into_every_roles_afd_config(capsys, tmp_path):
    extra = {"core_num": 16, "quant_mode": 1}
    out = plan_text(capsys, tmp_path, tiny_gpu(connector="CAMP2pAFDConnector", connector_extra_config=extra))
    assert additional_config(out, "attention")["connector_extra_config"] == extra
    assert additional_config(out, "ffn")["connector_extra_config"] == extra
    assert "async" not in additional_config(out, "ffn")


def test_a_variant_keeps_its_parents_connector_and_extra_config():
    doc = tiny_gpu(connector="GpuAsyncAFDConnector", connector_extra_config={"ring_depth": 2})
    doc["cases"]["afd-1a1f-graph"] = {"extends": "afd-1a1f", "graph": {"capture_size": 8}}
    variant = parse_profile(doc, "tiny.yaml").case("afd-1a1f-graph")
    assert (variant.connector, dict(variant.connector_extra_config)) == ("GpuAsyncAFDConnector", {"ring_depth": 2})
    assert list(variant.roles()) == ["attention", "ffn"]


def _error(doc: dict) -> str:
    with pytest.raises(UsageError) as info:
        parse_profile(doc, "bad.yaml")
    assert "\n" not in str(info.value)
    return str(info.value)


def test_an_unknown_connector_is_refused_naming_the_known_ones_and_how_to_declare_it():
    assert _error(tiny_gpu(connector="ShmAFDConnector")) == (
        "bad.yaml: cases.afd-1a1f.connector: unknown connector 'ShmAFDConnector' (known: "
        + ", ".join(KNOWN)
        + ") (fix: use a known one, or declare its traits: connectors: "
        "{ShmAFDConnector: {launch_order: ffn_first | attention_first}})"
    )


@pytest.mark.parametrize(
    ("connector", "extra", "expected"),
    [
        (
            "P2pNcclAFDConnector",
            {"core_num": 8},
            "cases.afd-1a1f.connector_extra_config.core_num: P2pNcclAFDConnector has no connector_extra_config key "
            "'core_num' (fix: remove it: it takes none)",
        ),
        (
            "GpuAsyncAFDConnector",
            {"ringdepth": 2},
            "GpuAsyncAFDConnector has no connector_extra_config key 'ringdepth' (fix: use some of: attn_ranks_per_dp, "
            "ring_depth, recv_poll_timeout_ms, async_moe_ubatching, async_moe_num_ubatches, async_moe_split)",
        ),
    ],
)
def test_an_extra_config_key_the_connector_does_not_know_is_refused(connector, extra, expected):
    assert expected in _error(tiny_gpu(connector=connector, connector_extra_config=extra))


def test_a_declared_connector_launches_as_declared_and_passes_its_extra_config(capsys, tmp_path):
    doc = tiny_gpu(connector="ShmAFDConnector", connector_extra_config={"segment_mib": 64})
    doc["connectors"] = {"ShmAFDConnector": {"launch_order": "attention_first", "config": {"async": True}}}
    out = plan_text(capsys, tmp_path, doc)
    assert out.index("# 1. attention") < out.index("# 2. ffn")
    assert additional_config(out, "ffn")["connector_extra_config"] == {"segment_mib": 64}  # no keys listed: unchecked
    assert additional_config(out, "ffn")["async"] is True
    assert parse_profile(doc, "tiny.yaml").case("afd-1a1f").connector_traits.rendezvous_role == "attention"


@pytest.mark.parametrize(
    ("declaration", "expected"),
    [
        ({"launch_order": "sideways"}, "connectors.ShmAFDConnector.launch_order: unknown launch order 'sideways'"),
        ({"launch_order": "ffn_first", "rendezvous_role": "router"}, "rendezvous_role: unknown role 'router'"),
        (
            {"launch_order": "ffn_first", "extra_keys": ["a"]},
            "ShmAFDConnector has no connector_extra_config key 'segment_mib' (fix: use some of: a)",
        ),
        ({"launch_order": "ffn_first", "order": 1}, "connectors.ShmAFDConnector.order: unknown key"),
        (
            {"launch_order": "ffn_first", "config": {"port": 1}},
            "connectors.ShmAFDConnector.config.port: is set by the plan for every connector (fix: remove port)",
        ),
    ],
)
def test_a_bad_declaration_is_a_one_line_error(declaration, expected):
    doc = tiny_gpu(connector="ShmAFDConnector", connector_extra_config={"segment_mib": 64})
    doc["connectors"] = {"ShmAFDConnector": declaration}
    assert expected in _error(doc)
