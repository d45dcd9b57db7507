"""Unit tier: preflight's ``afd plugin config`` check (``preflight/plugin_config.py``). What is asked (each AFD
process's ``--additional-config`` and role, read from its argv) and what is concluded (passed, the first refusal
naming case, process and the plugin's own message, one line where the plugin cannot be imported or asked, skipped
with the reason and the profile reader's rules where there is no plugin) are pure and tested with an ask function
standing in for the plugin; every AFD process goes to the plugin in one ask. The subprocess path runs once against a
stub plugin (``stub_plugin`` below), not the real one: the GPU tier (``tests/gpu/test_plugin_config_gpu.py``) asks
the real installed plugin."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from preflight_fixtures import TEST_PROFILE, h200x2_readings, installed_software

from afd_e2e.plan import build_plan
from afd_e2e.preflight.checks import FAIL, PASS, SKIP
from afd_e2e.preflight.plugin_config import (
    PLUGIN_CONFIG,
    ConfigQuery,
    PluginAnswer,
    ask_installed_plugin,
    check_plugin_config,
    config_queries,
    read_answer,
)
from afd_e2e.preflight.run_checks import run_preflight
from afd_e2e.preflight.software import InstalledSoftware
from afd_e2e.profile import load_profile
from afd_e2e.profile.model import ArgEdit

PROFILE = load_profile("deepseek-v2-lite-2a2f")
PLAN = build_plan(PROFILE, model_path="/m")
P2P_REFUSAL = "ValueError: P2pNcclAFDConnector currently requires num_attention_ranks >= num_ffn_ranks, got 2 < 3"


def software(**kw) -> InstalledSoftware:
    return installed_software(**{"afd_plugin_version": "0.3.1", **kw})


class Plugin:
    """Stands in for the installed plugin: answers each query with ``verdict(query)`` and records every ask."""

    def __init__(self, verdict=lambda query: None):
        self.verdict = verdict
        self.asks: list[tuple[str, list[ConfigQuery]]] = []

    def __call__(self, python, queries):
        self.asks.append((python, list(queries)))
        return PluginAnswer(verdicts=tuple(self.verdict(q) for q in queries))


def test_every_afd_process_is_asked_with_its_own_config_and_role():
    queries = config_queries(PLAN)
    assert [(q.case_id, q.process, q.role) for q in queries] == [
        ("afd-2a2f", "ffn", "ffn"),
        ("afd-2a2f", "attention", "attention"),
    ]
    for query in queries:
        afd = query.additional_config["afd"]
        assert (afd["role"], afd["num_attention_ranks"], afd["num_ffn_ranks"]) == (query.role, 2, 2)
        assert query.unreadable is None


def test_all_accepted_passes_in_one_ask_of_the_vllm_interpreter():
    plugin = Plugin()
    check = check_plugin_config(PROFILE, PLAN, software(), plugin)
    assert (check.status, check.measured) == (
        PASS,
        "2 AFD process config(s) accepted by afd_plugin.config in /opt/venv/bin/python",
    )
    ((python, asked),) = plugin.asks
    assert python == "/opt/venv/bin/python" and [q.role for q in asked] == ["ffn", "attention"]


def test_the_first_refusal_names_case_process_and_the_plugins_own_message():
    plugin = Plugin(lambda q: P2P_REFUSAL)
    check = check_plugin_config(PROFILE, PLAN, software(), plugin)
    assert check.status == FAIL
    assert check.measured == (
        "case afd-2a2f ffn: the installed plugin (afd_plugin:register 0.3.1 in /opt/venv/bin/python) refuses its AFD "
        f"config: {P2P_REFUSAL} (1 more alike)"
    )
    assert check.fix == (
        "change case afd-2a2f's layout or AFD config as the plugin's message says, or install the plugin the profile "
        "targets (software.afd_plugin_rules: current)"
    )


def test_an_unimportable_plugin_or_one_that_does_not_answer_is_one_line():
    unimportable = check_plugin_config(
        PROFILE,
        PLAN,
        software(),
        lambda python, queries: PluginAnswer(import_error="ImportError: cannot import name 'x'"),
    )
    assert (unimportable.status, unimportable.measured) == (
        FAIL,
        "afd_plugin.config cannot be imported in /opt/venv/bin/python: ImportError: cannot import name 'x'",
    )
    assert "reinstall the AFD plugin" in unimportable.fix
    silent = check_plugin_config(
        PROFILE,
        PLAN,
        software(),
        lambda python, queries: PluginAnswer(problem="/opt/venv/bin/python did not answer within 60 s"),
    )
    assert silent.status == FAIL and silent.measured.startswith("cannot tell: ")
    for check in (unimportable, silent):
        assert "\n" not in check.measured + check.fix


def test_skipped_with_the_reason_and_the_profile_readers_rule_where_no_plugin_can_be_asked():
    plugin = Plugin()
    no_plugin = check_plugin_config(PROFILE, PLAN, software(afd_plugin=None), plugin)
    assert (no_plugin.status, no_plugin.measured) == (
        SKIP,
        "the AFD plugin is not installed in /opt/venv/bin/python (see the afd plugin check); the profile reader's "
        "topology rules applied: P2pNcclAFDConnector A >= F (afd-plugin PR #309)",
    )
    no_python = check_plugin_config(PROFILE, PLAN, software(vllm_python=None), plugin)
    assert no_python.status == SKIP and no_python.measured.startswith("vLLM's Python could not be asked")
    tiny = load_profile("tiny-cpu")
    no_afd = check_plugin_config(tiny, build_plan(tiny, model_path="/m"), software(), plugin)
    assert (no_afd.status, no_afd.measured) == (SKIP, "no AFD case planned")
    assert plugin.asks == []


def test_a_profile_for_the_older_plugin_names_its_rule_when_skipped():
    old = replace(PROFILE, software=replace(PROFILE.software, afd_plugin_rules="before-pr-309"))
    check = check_plugin_config(old, PLAN, software(afd_plugin=None), Plugin())
    assert check.measured.endswith(
        "P2pNcclAFDConnector A >= F and A % F == 0 (afd-plugin validate_p2p_topology before PR #309)"
    )


@pytest.mark.parametrize(
    ("add_args", "config", "unreadable"),
    [
        (['--additional-config={"afd": {}}'], {"afd": {}}, None),  # the last one wins, as in vLLM's parser
        (["--additional-config", "{afd"], None, "its --additional-config is not JSON (Expecting property name"),
        (["--additional-config", "[1]"], None, "its --additional-config is not a JSON object"),
    ],
)
def test_an_edited_config_is_read_as_the_process_passes_it(add_args, config, unreadable):
    edit = ArgEdit(role="ffn", add_args=tuple(add_args))
    case = replace(PROFILE.case("afd-2a2f"), edits=(edit,))
    profile = replace(PROFILE, cases=(case,))
    ffn, attention = config_queries(build_plan(profile, model_path="/m"))
    assert ffn.additional_config == config and attention.unreadable is None
    assert (ffn.unreadable or "").startswith(unreadable or "")
    if unreadable:  # refused here, the readable one still asked
        plugin = Plugin()
        check = check_plugin_config(profile, build_plan(profile, model_path="/m"), software(), plugin)
        assert check.status == FAIL and "case afd-2a2f ffn: the installed plugin" in check.measured
        assert [q.process for q in plugin.asks[0][1]] == ["attention"]


def test_an_ffn_process_without_additional_config_is_asked_with_none():
    edit = ArgEdit(role="ffn", remove_args=("--additional-config",))
    profile = replace(PROFILE, cases=(replace(PROFILE.case("afd-2a2f"), edits=(edit,)),))
    ffn, _ = config_queries(build_plan(profile, model_path="/m"))
    assert ffn.additional_config == {}  # the plugin says 'AFD config requires additional_config["afd"]'


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr", "expected"),
    [
        (0, 'noise\n{"verdicts": [null, "ValueError: no"]}\n', "", PluginAnswer(verdicts=(None, "ValueError: no"))),
        (0, '{"import_error": "ModuleNotFoundError: x"}', "", PluginAnswer(import_error="ModuleNotFoundError: x")),
        (1, "", "Traceback\nRuntimeError: boom\n", PluginAnswer(problem="the check exited 1: RuntimeError: boom")),
        (0, "not json", "", PluginAnswer(problem="the check exited 0: no output")),
        (0, '{"verdicts": [null]}', "", PluginAnswer(problem="the check answered 1 verdicts for 2 configs")),
    ],
)
def test_the_scripts_answer_is_read_or_said_unusable(returncode, stdout, stderr, expected):
    assert read_answer(returncode, stdout, stderr, asked=2) == expected


def test_preflight_runs_the_check_beside_the_software_checks():
    profile = load_profile(str(TEST_PROFILE))
    plan = build_plan(profile, model_path="/m")
    plugin = Plugin()
    report = run_preflight(
        profile,
        plan,
        model_path=None,
        read_hardware=h200x2_readings,
        installed=software(),
        stack_dumps=list,
        ask_plugin=plugin,
    )
    (check,) = [c for c in report.checks if c.name == PLUGIN_CONFIG]
    assert check.status == PASS and len(plugin.asks) == 1


STUB_CONFIG = '''"""A STUB of afd_plugin.config, written by the unit tier: the real AFD plugin is not installable in CI, so this
stands in for it to exercise the subprocess path only (its messages are not the plugin's); the GPU tier
(tests/gpu/test_plugin_config_gpu.py) runs the real installed plugin's parse_afd_config."""


def parse_afd_config(source, *, expected_role=None):
    afd = source["afd"]
    if afd["role"] != expected_role:
        raise ValueError(f"stub: role mismatch: expected {expected_role!r}, got {afd['role']!r}")
    if afd["num_attention_ranks"] < afd["num_ffn_ranks"]:
        raise ValueError("stub: num_attention_ranks < num_ffn_ranks")
    if afd.get("crash"):
        raise RuntimeError("stub: crashed")
'''


@pytest.fixture
def stub_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stub ``afd_plugin`` package on the PYTHONPATH of the interpreter asked (this one)."""
    package = tmp_path / "stub" / "afd_plugin"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""A stub AFD plugin for the unit tier (see config.py)."""\n')
    (package / "config.py").write_text(STUB_CONFIG)
    monkeypatch.setenv("PYTHONPATH", str(package.parent))
    return package


def query(role: str, attention: int, ffn: int, **more) -> ConfigQuery:
    afd = {"role": role, "num_attention_ranks": attention, "num_ffn_ranks": ffn, **more}
    return ConfigQuery("afd-x", role, role, {"afd": afd})


def test_the_subprocess_asks_the_interpreters_plugin_once_for_every_config(stub_plugin):
    wrong_role = ConfigQuery(
        "c", "ffn", "ffn", {"afd": {"role": "attention", "num_attention_ranks": 1, "num_ffn_ranks": 1}}
    )
    answer = ask_installed_plugin(sys.executable, [query("ffn", 3, 2), query("attention", 2, 3), wrong_role])
    assert answer == PluginAnswer(
        verdicts=(
            None,
            "ValueError: stub: num_attention_ranks < num_ffn_ranks",
            "ValueError: stub: role mismatch: expected 'ffn', got 'attention'",
        )
    )


def test_the_subprocess_says_when_the_plugin_cannot_be_imported_or_crashes(stub_plugin, monkeypatch):
    crashed = ask_installed_plugin(sys.executable, [query("ffn", 1, 1, crash=True)])
    assert crashed.problem == "the check exited 1: RuntimeError: stub: crashed"
    monkeypatch.setenv("PYTHONPATH", str(stub_plugin.parent.parent))  # no afd_plugin there
    missing = ask_installed_plugin(sys.executable, [query("ffn", 1, 1)])
    assert missing == PluginAnswer(import_error="ModuleNotFoundError: No module named 'afd_plugin'")
