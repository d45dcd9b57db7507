"""Unit tier: the per-vLLM-version rules (plan/vllm_versions.py) from version strings alone: which release has
``--shutdown-timeout``, the DBO thresholds' minimum from 0.30; the plan adds ``--shutdown-timeout`` from
``budgets.teardown_s`` only for a vLLM that has it (and says which version it assumed); preflight refuses a case
whose argv the installed vLLM would refuse, naming the rule, the version and the fix."""

from __future__ import annotations

from dataclasses import replace

import pytest

from afd_e2e.errors import UsageError
from afd_e2e.plan import build_plan
from afd_e2e.plan.serve_argv import shutdown_timeout_s
from afd_e2e.plan.shell_text import render_text
from afd_e2e.plan.vllm_versions import SHUTDOWN_TIMEOUT, breaches, flag_value, has_flag, release
from afd_e2e.preflight.checks import FAIL, PASS, SKIP
from afd_e2e.preflight.software import VERSION_RULES, InstalledSoftware, check_software
from afd_e2e.profile import load_profile

DBO_ARGV = ["vllm", "serve", "/m", "--enable-dbo", "--dbo-decode-token-threshold=1", "--dbo-prefill-token-threshold=64"]
# an Attention role's argv: the AFD plugin's config lifts vLLM's all2all check on micro-batching (its own patch)
AFD_CONFIG = ["--additional-config", '{"afd":{"role":"attention","connector":"P2pNcclAFDConnector"}}']
NATIVE_DBO = [
    "vllm",
    "serve",
    "/m",
    "--enable-dbo",
    "--dbo-decode-token-threshold=2",
    "--dbo-prefill-token-threshold=8",
]


def installed(vllm: str | None) -> InstalledSoftware:
    return InstalledSoftware(
        afd_e2e_python="/opt/afd-e2e/bin/python",
        vllm_executable="/opt/venv/bin/vllm",
        vllm_python="/opt/venv/bin/python",
        vllm=vllm,
        torch="2.11.0",
        afd_plugin="afd_plugin:register",
        routing_strategies=None,
        problem=None,
        nvidia_ml_py="13.580.82",
    )


@pytest.mark.parametrize(
    ("version", "numbers"),
    [
        ("0.32.0+cpu", (0, 32, 0)),
        ("0.26.0+cu130", (0, 26, 0)),
        ("0.28.1rc1.dev500+g51da0ca66", (0, 28, 1)),
        ("0.30", (0, 30, 0)),
    ],
)
def test_a_version_is_compared_by_its_release_numbers(version, numbers):
    assert release(version) == numbers


def test_a_version_without_release_numbers_is_refused_with_an_example():
    with pytest.raises(UsageError) as raised:
        release("main")
    assert "0.26.0" in raised.value.fix


def test_shutdown_timeout_exists_from_vllm_0_18():
    assert not has_flag("0.17.1", SHUTDOWN_TIMEOUT)
    assert has_flag("0.18.0", SHUTDOWN_TIMEOUT) and has_flag("0.26.0+cu130", SHUTDOWN_TIMEOUT)
    assert has_flag("0.1.0", "--enable-dbo")  # not in the table: not version-gated


def test_flag_values_are_read_as_argparse_reads_them():
    argv = ["--x=1", "--y", "2", "--z", "--x", "3"]
    assert (flag_value(argv, "--x"), flag_value(argv, "--y"), flag_value(argv, "--z")) == ("3", "2", "")
    assert flag_value(argv, "--w") is None


def test_a_dbo_decode_threshold_below_2_breaks_the_rule_from_vllm_0_30_only():
    afd = DBO_ARGV + AFD_CONFIG
    assert breaches(afd, "0.26.0+cu130") == []
    assert breaches(afd, "0.29.9") == []
    [breach] = breaches(afd, "0.30.0")
    assert breach.found == "--dbo-decode-token-threshold=1 under vLLM 0.30.0"
    assert breach.rule.startswith("--dbo-decode-token-threshold >= 2 with --enable-dbo (vLLM >= 0.30.0")
    assert breach.fix.startswith(
        "raise --dbo-decode-token-threshold to 2 or more (the case's dbo.decode_token_threshold or add_args)"
    )
    spaced = ["--enable-dbo", "--dbo-prefill-token-threshold", "1", "--dbo-decode-token-threshold", "2", *AFD_CONFIG]
    assert [b.found for b in breaches(spaced, "0.32.0+cpu")] == [
        "--dbo-prefill-token-threshold=1 under vLLM 0.32.0+cpu"
    ]
    assert breaches(DBO_ARGV[:3] + DBO_ARGV[4:], "0.32.0") == []  # no --enable-dbo: vLLM does not split


def test_native_dbo_needs_a_micro_batching_all2all_backend_and_an_afd_role_does_not():
    """The 12-06 H100 run: native DP1 with --enable-dbo died at start-up on vLLM 0.26's assertion, 47 s after launch."""
    [breach] = breaches(NATIVE_DBO, "0.26.0+cu130")
    assert breach.found == "--all2all-backend=allgather_reducescatter (the default) under vLLM 0.26.0+cu130"
    assert breach.rule.startswith(
        "--all2all-backend one of deepep_low_latency, deepep_high_throughput, nixl_ep with --enable-dbo (vLLM >= 0.26.0"
    )
    assert breach.fix.startswith("add --all2all-backend=deepep_low_latency to the case's add_args")
    assert [b.found for b in breaches([*NATIVE_DBO, "--all2all-backend", "naive"], "0.32.0")] == [
        "--all2all-backend=naive under vLLM 0.32.0"
    ]
    assert breaches([*NATIVE_DBO, "--all2all-backend=deepep_low_latency"], "0.26.0") == []
    assert breaches(NATIVE_DBO + AFD_CONFIG, "0.26.0") == []  # the plugin patches the check for its roles
    assert breaches(NATIVE_DBO[:3], "0.26.0") == []  # no DBO: no micro-batching
    not_afd = ["--additional-config", '{"kv_transfer": 1}']
    assert len(breaches(NATIVE_DBO + not_afd, "0.26.0")) == 1


def test_a_flag_older_vllm_lacks_breaks_the_rule():
    [breach] = breaches(["vllm", "serve", "/m", "--shutdown-timeout=20"], "0.17.0")
    assert breach.rule.startswith("--shutdown-timeout exists from vLLM 0.18.0")
    assert "remove --shutdown-timeout" in breach.fix
    assert breaches(["vllm", "serve", "/m", "--shutdown-timeout=20"], "0.18.0") == []


def test_the_plan_sets_shutdown_timeout_from_the_teardown_budget_where_the_vllm_has_it():
    profile = load_profile("tiny-cpu")
    assert shutdown_timeout_s(replace(profile, budgets=replace(profile.budgets, drain_s=2))) == 2, "a stated drain"
    profile = replace(profile, budgets=replace(profile.budgets, teardown_s=12.5))
    profile = replace(
        profile, engine=replace(profile.engine, serve_args=(*profile.engine.serve_args, "--shutdown-timeout=99"))
    )
    plan = build_plan(profile, model_path="/m", vllm_version="0.32.0+cpu")
    argvs = [p.argv for case in plan.cases for p in case.processes]
    assert argvs and all(flag_value(argv, SHUTDOWN_TIMEOUT) == "6" for argv in argvs)  # half of 12.5 s, whole
    assert all(sum(a.startswith(SHUTDOWN_TIMEOUT) for a in argv) == 1 for argv in argvs)  # the budget's, once
    assert "# for vLLM 0.32.0+cpu: the flags that depend on its version follow it" in render_text(plan)
    for older in (build_plan(load_profile("tiny-cpu"), model_path="/m", vllm_version=v) for v in ("0.17.0", None)):
        assert not any(flag_value(p.argv, SHUTDOWN_TIMEOUT) for case in older.cases for p in case.processes)
    unknown = build_plan(load_profile("tiny-cpu"), model_path="/m")
    assert "# vLLM version not known: flags that exist only from some vLLM version (--shutdown-timeout) left out" in (
        render_text(unknown)
    )


def test_preflight_refuses_a_dbo_threshold_of_1_under_vllm_0_30_naming_rule_version_and_fix():
    profile = load_profile("deepseek-v2-lite-features")  # decode threshold 1, as the plugin's runner on vLLM 0.26
    plan = build_plan(profile, model_path="/m", devices=(0, 1), vllm_version="0.30.0")
    [check] = [c for c in check_software(profile, plan, installed("0.30.0")) if c.name == VERSION_RULES]
    assert check.status == FAIL
    assert check.measured.startswith(
        "case afd-1a1f-dbo ffn: --dbo-decode-token-threshold=1 under vLLM 0.30.0 breaks --dbo-decode-token-threshold"
        " >= 2 with --enable-dbo (vLLM >= 0.30.0"
    )
    assert check.measured.endswith("(1 more alike)")  # the attention role asks for the same
    assert check.fix == (
        "raise --dbo-decode-token-threshold to 2 or more (the case's dbo.decode_token_threshold or add_args), or run a vLLM older than 0.30.0"
    )
    assert "\n" not in check.measured + check.fix
    gpu_kit = build_plan(profile, model_path="/m", devices=(0, 1), vllm_version="0.26.0")
    [check] = [c for c in check_software(profile, gpu_kit, installed("0.26.0+cu130")) if c.name == VERSION_RULES]
    assert check.status == PASS and check.measured.endswith("fit vLLM 0.26.0+cu130")
    [check] = [c for c in check_software(profile, gpu_kit, installed(None)) if c.name == VERSION_RULES]
    assert check.status == SKIP


def test_preflight_refuses_a_plan_built_for_a_newer_vllm_than_the_installed_one():
    profile = load_profile("tiny-cpu")
    plan = build_plan(profile, model_path="/m", vllm_version="0.32.0")
    [check] = [c for c in check_software(profile, plan, installed("0.17.1")) if c.name == VERSION_RULES]
    assert check.status == FAIL
    assert "--shutdown-timeout given to vLLM 0.17.1 breaks --shutdown-timeout exists from vLLM 0.18.0" in check.measured
