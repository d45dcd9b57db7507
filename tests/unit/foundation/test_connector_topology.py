"""Unit tier: each connector's topology rule (``profile/connectors.py``) on a shipped profile's document edited in
the test: the current plugin's P2P connector takes any A >= F (afd-plugin PR #309), so ``afd-e2e plan`` prints a
3A2F case's paste-able commands, FFN first, with the rank counts in each role's ``--additional-config``; a 2A3F case
is refused in one line naming the case, the layout, the rule, its source and the fix; a profile that targets the
plugin before PR #309 (``software.afd_plugin_rules: before-pr-309``) gets that plugin's multiple-of rule."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml

from afd_e2e.cli import main
from afd_e2e.errors import UsageError
from afd_e2e.profile import parse_profile
from repo_paths import REPO

PROFILES = REPO / "python/afd_e2e/profiles"


def five_gpus(**cases: dict) -> dict:
    """deepseek-v2-lite-2a2f's document on five GPUs, with two more device groups (a3: GPUs 0-2, f2: GPUs 3-4)
    and ``cases`` added."""
    doc = yaml.safe_load((PROFILES / "deepseek-v2-lite-2a2f.yaml").read_text())
    doc["hardware"]["gpus"] = doc["devices"]["count"] = 5
    doc["agent_tags"]["gpus"] = "5"
    doc["devices"]["default"] = [0, 1, 2, 3, 4]
    doc["devices"]["groups"].update(a3=[0, 3], f2=[3, 5], f3=[2, 5])
    doc["cases"].update(cases)
    return doc


def afd_case(attention: dict, ffn: dict, **more: object) -> dict:
    return {"kind": "afd", "phases": ["smoke"], "attention": attention, "ffn": ffn, **more}


A3F2 = afd_case({"devices": "a3", "dp": 3, "tp": 1}, {"devices": "f2", "dp": 2, "tp": 1})
A2F3 = afd_case({"devices": "attention", "dp": 2, "tp": 1}, {"devices": "f3", "dp": 3, "tp": 1})


def plan_text(capsys, tmp_path, doc: dict, case: str) -> str:
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(doc))
    code = main(["plan", "--profile", str(path), "--case", case, "--model", "/m", "--vllm-version", "0.26.0"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def afd_configs(out: str) -> list[dict]:
    """Each pasted command's AFD config, in the order printed."""
    configs = []
    for line in out.splitlines():
        if "--additional-config" in line:
            argv = shlex.split(line.strip().removeprefix("setsid ").removesuffix(" &"))
            configs.append(json.loads(argv[argv.index("--additional-config") + 1])["afd"])
    return configs


@pytest.mark.parametrize(("case", "attention", "ffn"), [("afd-3a2f", 3, 2), ("afd-2a2f", 2, 2)])
def test_a_layout_with_a_at_least_f_plans_ffn_first_with_its_rank_counts(capsys, tmp_path, case, attention, ffn):
    out = plan_text(capsys, tmp_path, five_gpus(**{"afd-3a2f": A3F2}), case)
    assert out.index("# 1. ffn") < out.index("# 2. attention")
    configs = afd_configs(out)
    assert [c["role"] for c in configs] == ["ffn", "attention"]
    for config in configs:
        assert (config["num_attention_ranks"], config["num_ffn_ranks"]) == (attention, ffn)
        assert config["connector"] == "P2pNcclAFDConnector"
        assert (config["host"], config["port"]) == (configs[0]["host"], configs[0]["port"])  # one rendezvous


def test_a_2a2f_case_on_model_runner_v2_gets_the_variable_and_the_plugins_mrv2_flags(capsys, tmp_path):
    """Issue 42: the plan of a 2A2F MRV2 case and a 3A2F (V1) case; each command is paste-able as printed."""
    doc = five_gpus(**{"afd-3a2f": A3F2, "afd-2a2f-v2": {"extends": "afd-2a2f", "model_runner": "v2"}})
    flags = ("--no-enable-prefix-caching", "--no-enable-chunked-prefill", "--no-async-scheduling")
    v2 = plan_text(capsys, tmp_path, doc, "afd-2a2f-v2")
    commands = [line for line in v2.replace(" \\\n", " ").splitlines() if "--additional-config" in line]
    assert len(commands) == 2 and v2.index("# 1. ffn") < v2.index("# 2. attention")
    for line in commands:  # env ... VAR=value setsid vllm serve ... &: as a shell reads it
        argv = shlex.split(line.strip().removesuffix(" &"))
        assert "VLLM_USE_V2_MODEL_RUNNER=1" in argv and all(argv.count(flag) == 1 for flag in flags), argv
    v1 = plan_text(capsys, tmp_path, doc, "afd-3a2f")
    assert "VLLM_USE_V2_MODEL_RUNNER=0" in v1 and not any(flag in v1 for flag in flags)


def _error(doc: dict) -> str:
    with pytest.raises(UsageError) as info:
        parse_profile(doc, "bad.yaml")
    assert "\n" not in str(info.value)
    return str(info.value)


def test_a_layout_with_fewer_attention_than_ffn_ranks_is_refused_naming_the_rule_and_its_source():
    assert _error(five_gpus(**{"afd-2a3f": A2F3})) == (
        "bad.yaml: cases.afd-2a3f.attention.dp: case afd-2a3f's layout 2A3F breaks P2pNcclAFDConnector's topology "
        "rule A >= F (afd-plugin PR #309) (fix: give Attention at least as many ranks (dp * tp) as FFN, or fewer FFN "
        "ranks)"
    )


def test_a_profile_targeting_the_plugin_before_pr_309_gets_its_multiple_of_rule():
    doc = five_gpus(**{"afd-3a2f": A3F2})
    doc["software"]["afd_plugin_rules"] = "before-pr-309"
    assert _error(doc) == (
        "bad.yaml: cases.afd-3a2f.attention.dp: case afd-3a2f's layout 3A2F breaks P2pNcclAFDConnector's topology "
        "rule A >= F and A % F == 0 (afd-plugin validate_p2p_topology before PR #309) (fix: make the Attention ranks "
        "(dp * tp) a multiple of the FFN ranks, or remove software.afd_plugin_rules: before-pr-309 where the agents' "
        "plugin is current)"
    )
    del doc["cases"]["afd-3a2f"]
    assert parse_profile(doc, "old.yaml").case("afd-2a2f").ffn.ranks == 2  # 2A2F fits both rules


def test_an_unknown_plugin_rules_name_is_refused_naming_the_known_ones():
    doc = five_gpus()
    doc["software"]["afd_plugin_rules"] = "2026-08"
    assert (
        "software.afd_plugin_rules: unknown AFD plugin rules '2026-08' (fix: use one of: current, before-pr-309)"
        in (_error(doc))
    )


def test_the_asynchronous_connectors_take_any_ratio_and_the_synchronous_ones_need_a_at_least_f():
    for connector in ("CAMAsyncAFDConnector", "GpuAsyncAFDConnector"):
        case = parse_profile(five_gpus(**{"afd-2a3f": {**A2F3, "connector": connector}}), "x.yaml").case("afd-2a3f")
        assert (case.attention.ranks, case.ffn.ranks) == (2, 3)
    assert "CAMP2pAFDConnector's topology rule A >= F (afd-plugin camp2p.py rank mapping)" in _error(
        five_gpus(**{"afd-2a3f": {**A2F3, "connector": "CAMP2pAFDConnector"}})
    )


@pytest.mark.parametrize(
    ("topology", "refused"),
    [
        (None, "rule A >= F (declared in the profile)"),
        ("multiple_of_ffn", "rule A >= F and A % F == 0 (declared in the profile)"),
        ("any", None),
    ],
)
def test_a_declared_connector_has_a_at_least_f_unless_it_declares_its_rule(topology, refused):
    declaration = {"launch_order": "ffn_first", **({"topology": topology} if topology else {})}
    doc = five_gpus(**{"afd-2a3f": {**A2F3, "connector": "ShmAFDConnector"}})
    doc["connectors"] = {"ShmAFDConnector": declaration}
    if refused:
        assert refused in _error(doc)
    else:
        assert parse_profile(doc, "x.yaml").case("afd-2a3f").ffn.ranks == 3


def test_a_declared_connector_with_an_unknown_topology_rule_is_refused():
    doc = five_gpus(**{"afd-2a3f": {**A2F3, "connector": "ShmAFDConnector"}})
    doc["connectors"] = {"ShmAFDConnector": {"launch_order": "ffn_first", "topology": "square"}}
    assert (
        "connectors.ShmAFDConnector.topology: unknown topology rule 'square' (fix: use one of: at_least_ffn (A >= F), "
        "multiple_of_ffn (A >= F and A % F == 0), any (A >= 1 and F >= 1))"
    ) in _error(doc)
