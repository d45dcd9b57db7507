"""What the execution-evidence tests share: tiny-cpu cut to three start-ups (compiled, eager, and compiled as asked
but forced eager by an engine wrapper the harness does not control), and the wrapper itself.

The engine test (``tests/engine/test_execution_cpu_vllm.py``) runs this profile live; the fixture producer
(``tests/fixtures/execution/record_tiny_cpu.py``) runs the same and keeps the trimmed logs.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import yaml

from repo_paths import REPO

PORT_BASE = 21600  # the engine tier's execution run (``execution_run``): 21600 (compiled), 21620 (forced eager)
# The sweep's budget in the cut-short case (``cut_short_sweep``): three repetitions a level make the first level alone
# take at least 24 s (32 prompts at 4 req/s each) and the search needs a second level (34 req/s, three repetitions of
# at least 1 s of sending plus the tail), so 30 s cannot hold the sweep (with one repetition a level, a fast machine
# finished it in 26.7 s: 4 passed, 34 failed, nothing to cut).
CUT_SHORT_S = 30
FORCE_EAGER_ENV = "AFD_E2E_TEST_FORCE_EAGER"  # set by the case; read by the wrapper only, never by the harness
CASES = ("cpu-compiled", "cpu-eager", "cpu-forced-eager")

WRAPPER = '''#!{python}
"""vllm, as an agent's wrapper might run it: with {env}=1 it appends --enforce-eager to `vllm serve` (a test's
stand-in for a site setting the harness does not control)."""
import os, sys
argv = [{vllm!r}, *sys.argv[1:]]
if os.environ.get({env!r}) == "1" and sys.argv[1:2] == ["serve"]:
    argv.append("--enforce-eager")
os.execv(argv[0], argv)
'''


def write_wrapper(folder: Path) -> Path:
    """A ``vllm`` wrapper beside this Python's own ``vllm`` (its shebang is this interpreter)."""
    real = Path(sys.executable).parent / "vllm"
    path = folder / "vllm-site-wrapper"
    path.write_text(WRAPPER.format(python=sys.executable, env=FORCE_EAGER_ENV, vllm=str(real)), encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def cpu_profile(port_base: int, executable: Path, cases: tuple[str, ...] = CASES) -> dict:
    """tiny-cpu with smoke-only ``cases`` of three: compiled (no --enforce-eager), eager (as shipped), and compiled
    as asked whose engine the wrapper forces eager."""
    document = yaml.safe_load((REPO / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text(encoding="utf-8"))
    document["name"] = "tiny-cpu-execution"
    document["description"] = "SMOKE: tiny random-weight MoE on vLLM's CPU backend, compiled vs eager"
    document["engine"]["port_base"] = port_base
    document["engine"]["executable"] = str(executable)
    compiled = {"kind": "native", "phases": ["smoke"], "topology": {"dp": 1, "tp": 1, "ep": False}}
    every = {
        "cpu-compiled": {**compiled, "remove_args": ["--enforce-eager"]},
        "cpu-eager": dict(compiled),
        "cpu-forced-eager": {**compiled, "remove_args": ["--enforce-eager"], "env": {FORCE_EAGER_ENV: "1"}},
    }
    document["cases"] = {case_id: every[case_id] for case_id in cases}
    document["workloads"] = {"smoke": document["workloads"]["smoke"]}
    document["comparisons"] = {}
    document.pop("trend", None)
    return document


def cut_short_sweep(document: dict, case_id: str) -> dict:
    """``document`` with ``case_id`` also sweeping tiny-cpu's capacity after its smoke, under a budget that runs out
    during its levels whatever the machine's speed (``CUT_SHORT_S``, three repetitions a level)."""
    shipped = yaml.safe_load((REPO / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text(encoding="utf-8"))
    document["cases"][case_id]["phases"] = ["smoke", "capacity"]
    document["workloads"]["bench"] = shipped["workloads"]["bench"]
    document["workloads"]["capacity"] = {**shipped["workloads"]["capacity"], "repetitions": 3}
    document["budgets"]["capacity_s"] = CUT_SHORT_S
    return document


def run_profile(document: dict, work: Path, out: Path, model: Path) -> subprocess.CompletedProcess:
    """``afd-e2e run`` of ``document`` into ``out``, this repository's package first on the path."""
    profile = work / f"{document['name']}.yaml"
    profile.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    pythonpath = os.pathsep.join(filter(None, [str(REPO / "python"), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "AFD_E2E_TINY_MODEL": str(model), "AFD_E2E_BACKEND": "cpu"}
    command = [sys.executable, "-m", "afd_e2e", "run", "--profile", str(profile), "--out", str(out)]
    return subprocess.run(command, env=env, timeout=900, check=False, text=True, capture_output=True)
