"""Engine tier: the per-vLLM-version rules (plan/vllm_versions.py) against the real CPU vLLM (0.32): a run's plan
is built for the installed version, so every ``vllm serve`` gets ``--shutdown-timeout`` from ``budgets.teardown_s``,
and the installed vLLM's own parser knows that flag; a case whose argv that vLLM refuses (a DBO decode threshold of
1, refused from 0.30) is refused by preflight before anything is launched.

Launches no vLLM server: the installed ``vllm``'s interpreter answers the version probe (a fraction of a second) and
parses the planned argv with vLLM's own ``serve`` parser (about 15 s, importing vLLM); the refused run launches
nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from afd_e2e.errors import EXIT_FAILED
from afd_e2e.plan.serve_argv import shutdown_timeout_s
from afd_e2e.plan.vllm_versions import SHUTDOWN_TIMEOUT, flag_value, has_flag
from afd_e2e.preflight.software import VERSION_RULES, read_installed
from afd_e2e.profile import load_profile
from afd_e2e.runner.admission import RunRequest, admit
from afd_e2e.system.markers import find_marked
from repo_paths import GSM8K_DIR, REPO

# the most vLLM servers this module starts (tests/launch_counter.py): vLLM's own parser and a refused run; no server
LAUNCHES = 0

pytestmark = [pytest.mark.engine, pytest.mark.serverless]  # no server: beside the engine tier (scripts/test)

REAL_VLLM = shutil.which("vllm")
needs_vllm = pytest.mark.skipif(REAL_VLLM is None, reason="no vllm on PATH (scripts/install-cpu-vllm installs one)")


@needs_vllm
def test_the_run_gives_every_vllm_serve_the_teardown_budget_as_shutdown_timeout(tiny_model, tmp_path):
    version = read_installed(REAL_VLLM).vllm
    assert version and has_flag(version, SHUTDOWN_TIMEOUT)
    profile = load_profile("tiny-cpu")
    admission = admit(
        profile, {}, RunRequest(out=tmp_path / "out", model=str(tiny_model), gsm8k_dir=GSM8K_DIR), dry_run=True
    )
    assert admission.admitted, admission.refusals
    assert admission.plan and admission.plan.vllm_version == version
    argvs = [p.argv for case in admission.plan.cases for p in case.processes]
    assert argvs and all(flag_value(a, SHUTDOWN_TIMEOUT) == str(shutdown_timeout_s(profile)) for a in argvs)
    # vLLM's own parser reads the whole planned argv (after ``vllm serve MODEL``) in vLLM's interpreter: the flag is
    # the installed vLLM's, with the budget's value (not through ``vllm serve``, which would count as a launch).
    parse = (
        "import json, sys; from vllm.entrypoints.cli import serve; "
        "parsed = serve.make_arg_parser(serve.FlexibleArgumentParser()).parse_args(json.loads(sys.argv[1])); "
        "print(parsed.shutdown_timeout)"
    )
    python = read_installed(REAL_VLLM).vllm_python
    assert python is not None
    parsed = subprocess.run(
        [python, "-c", parse, json.dumps(list(argvs[0][3:]))], capture_output=True, text=True, timeout=300, check=True
    )
    assert parsed.stdout.strip().splitlines()[-1] == str(shutdown_timeout_s(profile))


@needs_vllm
def test_a_dbo_threshold_the_installed_vllm_refuses_is_refused_by_preflight_before_any_launch(tiny_model, tmp_path):
    doc = yaml.safe_load((REPO / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text())
    one = {**doc["cases"]["cpu-tp1"], "phases": ["smoke"]}
    one["add_args"] = ["--enable-dbo", "--dbo-decode-token-threshold=1"]  # DBO's own option is for CUDA profiles
    doc.update(name="tiny-cpu-dbo", cases={"cpu-dbo": one}, comparisons={})
    profile = tmp_path / "tiny-cpu-dbo.yaml"
    profile.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "afd_e2e", "run", "--profile", str(profile), "--model", str(tiny_model)]
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    done = subprocess.run([*argv, "--out", str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == EXIT_FAILED, done.stderr
    assert "nothing launched" in done.stderr + done.stdout
    results = json.loads((out / "results.json").read_text())
    [check] = [c for c in results["preflight"]["checks"] if c["name"] == VERSION_RULES]
    version = read_installed(REAL_VLLM).vllm
    assert check["status"] == "failed"
    assert check["measured"].startswith(
        f"case cpu-dbo server: --dbo-decode-token-threshold=1 under vLLM {version} breaks --dbo-decode-token-threshold"
        " >= 2 with --enable-dbo"
    )
    assert check["fix"].startswith("raise --dbo-decode-token-threshold to 2 or more")
    assert not results["cases"] and not find_marked(results["run_id"])
