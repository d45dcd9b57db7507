"""A capacity sweep's wall time against the same levels run one by one with the performance phase, on the real CPU
vLLM, in one invocation; and the model loads the sweep avoids.

    flock /tmp/afd-e2e-engine.lock env PYTHONPATH=python python benchmarks/capacity_sweep.py [--levels 4,16,64]

- sweep: one ``afd-e2e run`` of tiny-cpu's ``cpu-tp1`` with phases ``[smoke, capacity]`` at the explicit levels
  (every level run, none skipped): one launch, one warmup, every level's repetitions on it.
- one by one: for each level, one ``afd-e2e run`` of the same case with phases ``[smoke, performance]`` and
  ``workloads.bench`` at that level's load (same prompts, lengths, concurrency and repetitions): a launch and the
  performance phase's warmup per level, which is how a load curve was measured before the sweep.

Printed: each approach's wall time (the whole ``afd-e2e run``s), the ratio, launches, the seconds spent loading
models (launch to ready), and warmups. The measurement is the same (``vllm bench serve`` at each level); what
differs is what surrounds it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from afd_e2e.results import load_results
from afd_e2e.tiny_model import build_tiny_model

REPO = Path(__file__).resolve().parents[1]
CASE = "cpu-tp1"


def _base() -> dict:
    document = yaml.safe_load((REPO / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text(encoding="utf-8"))
    document["cases"] = {CASE: document["cases"][CASE]}
    document["comparisons"] = {}
    del document["workloads"]["gsm8k"]
    return document


def _run(document: dict, work: Path, name: str, model: Path, port_base: int) -> tuple[float, float, float]:
    """One ``afd-e2e run``: (wall seconds, launch-to-ready seconds, seconds in the measuring phase)."""
    profile = work / f"{name}.yaml"
    profile.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    out = work / name
    command = [sys.executable, "-m", "afd_e2e", "run", "--profile", str(profile), "--model", str(model)]
    command += ["--out", str(out), "--port-base", str(port_base)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    started = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    case = load_results(out).case(CASE)
    if case is None or case.status.value != "passed":
        sys.exit(f"{name}: afd-e2e run exited {done.returncode}: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    phase = next(p for p in ("capacity", "performance") if p in case.timings.phases)
    print(
        f"  {name}: {wall:.1f} s (ready after {case.timings.launch_to_ready_s:.1f} s, {phase} "
        f"{case.timings.phases[phase]:.1f} s)",
        flush=True,
    )
    return wall, case.timings.launch_to_ready_s or 0.0, case.timings.phases[phase]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="4,16,64", help="request rates (req/s), comma-separated")
    parser.add_argument("--repetitions", type=int, default=1)
    parser.add_argument("--port-base", type=int, default=24100)
    args = parser.parse_args()
    levels = [float(v) for v in args.levels.split(",")]
    model = build_tiny_model(REPO / ".tiny-model")

    sweep = _base()
    capacity = sweep["workloads"]["capacity"]
    capacity.pop("search", None)
    capacity.update(levels=levels, repetitions=args.repetitions, warmups=1, far_miss_below=0.0)
    sweep["cases"][CASE]["phases"] = ["smoke", "capacity"]
    bench = sweep["workloads"]["bench"]
    prompts = capacity.get("num_prompts", bench["num_prompts"])
    concurrency = capacity.get("max_concurrency", bench["max_concurrency"])

    print(f"levels {levels} req/s, {args.repetitions} repetition(s) each, {prompts} prompts; real CPU vLLM", flush=True)
    with tempfile.TemporaryDirectory(prefix="afd-e2e-capacity-bench-") as tmp:
        work = Path(tmp)
        print("sweep (one afd-e2e run):", flush=True)
        sweep_wall, sweep_ready, sweep_phase = _run(sweep, work, "sweep", model, args.port_base)
        print("one by one (one afd-e2e run per level, the performance phase):", flush=True)
        single = []
        for index, level in enumerate(levels):
            document = _base()
            document["cases"][CASE]["phases"] = ["smoke", "performance"]
            document["workloads"].pop("capacity")
            document["workloads"]["bench"].update(
                request_rate=level,
                max_concurrency=concurrency,
                num_prompts=prompts,
                warmups=1,
                repetitions=args.repetitions,
            )
            single.append(_run(document, work, f"level-{level:g}", model, args.port_base + 20 * (index + 1)))
    one_wall = sum(s[0] for s in single)
    one_ready = sum(s[1] for s in single)
    one_phase = sum(s[2] for s in single)
    print()
    print(f"{'':34}{'sweep':>10}{'one by one':>12}")
    print(f"{'wall time (s)':34}{sweep_wall:>10.1f}{one_wall:>12.1f}")
    print(f"{'model loads (launches)':34}{1:>10}{len(levels):>12}")
    print(f"{'loading models, launch to ready (s)':34}{sweep_ready:>10.1f}{one_ready:>12.1f}")
    print(f"{'measuring phase (s)':34}{sweep_phase:>10.1f}{one_phase:>12.1f}")
    print(f"{'warmup repetitions':34}{1:>10}{len(levels):>12}")
    print(
        f"\none by one / sweep: {one_wall / sweep_wall:.2f}x wall time; the sweep avoids {len(levels) - 1} model "
        f"loads ({one_ready - sweep_ready:.1f} s of start-up) and {len(levels) - 1} warmups"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
