"""A case's ``vllm bench serve`` commands from one warm client against one process per command, on one real CPU
vLLM server of the tiny model, in one invocation.

    flock /tmp/afd-e2e-engine.lock env PYTHONPATH=python .venv/bin/python benchmarks/bench_client.py [--runs 5]

Starts tiny-cpu's cpu-tp1 (``.tiny-model``, built if missing), then runs the same ``--runs`` repetitions of
tiny-cpu's ``workloads.bench`` (16 prompts, ISL 64, OSL 16) each way, alternating which goes first, and prints each
way's wall time, the seconds per command, the ratio, and the mean TPOT of each way (the measurement must not move:
the client changes what starts the command, not what it measures). Every repetition must pass.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from contextlib import nullcontext
from pathlib import Path

from afd_e2e.phases import builtin
from afd_e2e.plan import build_plan
from afd_e2e.profile import load_profile
from afd_e2e.profile.bench_spec import bench_spec
from afd_e2e.runner.cancellation import CancelFlag
from afd_e2e.runner.server import CaseServers
from afd_e2e.system.executables import resolve_executable
from afd_e2e.tiny_model import build_tiny_model
from afd_e2e.workloads import bench

builtin.install_phases()  # the built-in phases, which reading a profile needs (as cli.main installs them)

REPO = Path(__file__).resolve().parents[1]
PROFILE = load_profile("tiny-cpu")


def series(way: str, runs: int, base_url: str, model: Path, folder: Path) -> tuple[float, list[float]]:
    """``runs`` repetitions one way (``warm`` or ``cold``): wall seconds and each repetition's mean TPOT."""
    executable = resolve_executable(PROFILE.engine.executable)
    env = bench.client_env(os.environ)
    folder.mkdir(parents=True)
    tpots = []
    started = time.perf_counter()
    warm = way == "warm"
    scope = bench.warm_client(executable, env, folder / "client.log", server=base_url) if warm else nullcontext()
    with scope as client:
        if warm and client is None:
            raise SystemExit(f"{executable} is not vLLM's own CLI: no warm client to measure")
        for index in range(1, runs + 1):
            argv = bench.bench_argv(
                executable,
                bench_spec(PROFILE),
                base_url=base_url,
                model=PROFILE.model.served_name,
                tokenizer=str(model),
                result_dir=folder,
                result_file=f"rep-{index}.json",
            )
            rep, _ = bench.run_repetition(
                argv,
                result_path=folder / f"rep-{index}.json",
                log_path=folder / f"rep-{index}.log",
                num_prompts=bench_spec(PROFILE).num_prompts,
                required=["mean_tpot_ms"],
                timeout_s=bench_spec(PROFILE).timeout_s,
                label=f"{way} {index}",
                progress=lambda _line: None,
                cancelled=threading.Event(),
                heartbeat_s=1.0,
                env=env,
                client=client,
            )
            if rep.failure:
                raise SystemExit(f"{way} repetition {index} failed: {rep.failure}")
            tpots.append(rep.metrics["mean_tpot_ms"])
    return time.perf_counter() - started, tpots


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=19560)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    model = build_tiny_model(REPO / ".tiny-model")
    case = build_plan(PROFILE, model_path=str(model), case_ids=["cpu-tp1"], port_base=args.port).cases[0]
    with (
        tempfile.TemporaryDirectory(prefix="bench-client-") as tmp,
        CaseServers(case, Path(tmp) / "logs", scratch=Path(tmp) / "scratch", cache=Path(tmp) / ".cache") as servers,
    ):
        servers.launch()
        servers.wait_ready(CancelFlag())
        print(f"{args.runs} x vllm bench serve ({bench_spec(PROFILE).num_prompts} prompts), tiny model on the CPU vLLM")
        seconds: dict[str, float] = {}
        tpots: dict[str, list[float]] = {"warm": [], "cold": []}
        for order, first in enumerate(("cold", "warm")):  # each way once first, once second: the server warms too
            for way in (first, "warm" if first == "cold" else "cold"):
                wall, measured = series(way, args.runs, case.base_url, model, Path(tmp) / f"{way}-{order}")
                seconds[way] = seconds.get(way, 0.0) + wall
                tpots[way] += measured
        total = 2 * args.runs
        for way in ("cold", "warm"):
            print(
                f"{way:5} {seconds[way]:7.1f} s for {total} commands ({seconds[way] / total:5.2f} s each), "
                f"mean TPOT {statistics.mean(tpots[way]):.2f} ms (sd {statistics.stdev(tpots[way]):.2f})"
            )
        print(f"ratio cold / warm: {seconds['cold'] / seconds['warm']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
