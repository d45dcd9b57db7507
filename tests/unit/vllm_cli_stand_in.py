"""A stand-in of vLLM's CLI package for the warm bench client (``workloads/bench_client_script.py``): a
``vllm.entrypoints.cli.main`` of a few lines that records each import and each run and writes a real result JSON,
behind a ``vllm`` console script on this Python. The client warms it exactly as it warms the real one, which runs in
every engine-tier phase that benches; the unit tier has no vLLM."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from afd_e2e.workloads import bench
from repo_paths import FIXTURES

STAND_IN = """
import json, os, signal, sys
RECORD = os.environ["STAND_IN_RECORD"]
with open(RECORD, "a") as handle:
    handle.write(f"import {os.getpid()}\\n")


def main():
    args = sys.argv
    if "--help" in args:
        print("usage: vllm bench serve ...")
        raise SystemExit(0)
    with open(RECORD, "a") as handle:
        handle.write(f"run {os.getpid()} {args[0]}\\n")
    print("up", flush=True)
    if "--ignore-term" in args:  # a command that outlives its client's SIGTERM: only the group's SIGKILL ends it
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "--hang" in args:
        signal.pause()  # until the test's stop ends it
    if "--crash" in args:
        raise RuntimeError("the stand-in crashed")
    if "--exit" in args:
        raise SystemExit(int(args[args.index("--exit") + 1]))
    out = os.path.join(args[args.index("--result-dir") + 1], args[args.index("--result-filename") + 1])
    with open(os.environ["STAND_IN_RESULT"]) as source, open(out, "w") as target:
        target.write(source.read())
"""


def stand_in_vllm(folder: Path) -> tuple[str, dict[str, str], Path]:
    """A ``vllm`` console script over the stand-in package in ``folder``: (executable, the environment it needs,
    the record file). The record has a line ``import PID`` per process that imported the package (a warm client's
    start) and ``run PID ARGV0`` per command it ran."""
    site = folder / "site"
    package = site / "vllm" / "entrypoints" / "cli"
    package.mkdir(parents=True)
    for sub in (site / "vllm", site / "vllm" / "entrypoints", package):
        (sub / "__init__.py").write_text("", encoding="utf-8")
    (package / "main.py").write_text(STAND_IN, encoding="utf-8")
    script = folder / "bin" / "vllm"
    script.parent.mkdir()
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom vllm.entrypoints.cli.main import main\nsys.exit(main())\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    record = folder / "record"
    env = {
        **bench.client_env(os.environ),
        "PYTHONPATH": str(site),
        "STAND_IN_RECORD": str(record),
        "STAND_IN_RESULT": str(FIXTURES / "vllm_bench" / "passed.json"),
    }
    return str(script), env, record


def record_lines(record: Path, word: str) -> list[list[str]]:
    """The record's lines that start with ``word`` (``import``, ``run``), split; [] before any."""
    if not record.exists():
        return []
    return [line.split() for line in record.read_text(encoding="utf-8").splitlines() if line.startswith(word)]
