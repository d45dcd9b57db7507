"""Fetching and analysing 50 earlier builds for the trend, concurrently (the shipped 8 workers) against
one-at-a-time, in the same invocation, against the local Buildkite API of the tests (with a per-request latency,
as a real API across the internet has), and a second night that reads the agent's cache.

    PYTHONPATH=python python benchmarks/trend.py [--builds 50] [--latency-ms 40] [--repeats 3]

The history is derived from the real tiny-cpu runs in tests/fixtures/trend/ (a slowdown injected 6 builds before
tonight); both sides must find the same regressions at the same build, or the benchmark fails.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from afd_e2e.buildkite.rest import BuildkiteRest  # noqa: E402
from afd_e2e.profile import TrendSpec  # noqa: E402
from afd_e2e.results import load_results  # noqa: E402
from afd_e2e.trend.buildkite_history import BuildkiteHistory  # noqa: E402
from afd_e2e.trend.compute import TrendReport, compute_trend  # noqa: E402
from afd_e2e.trend.history import build_ref  # noqa: E402
from afd_e2e.trend.record import BuildRef  # noqa: E402
from fixtures.trend.buildkite_server import ORG, PIPELINE, STEP_KEY, local_buildkite, serve_history  # noqa: E402
from fixtures.trend.make_history import make_history  # noqa: E402

TOKEN = "benchmark-token"


def fetch_and_analyse(
    server, tonight: Path, builds: int, workers: int, cache: Path | None
) -> tuple[float, int, TrendReport]:
    """Seconds, API+storage requests, and the report of one trend over ``builds`` earlier builds."""
    server.requests.clear()
    results = load_results(tonight)
    source = BuildkiteHistory(
        BuildkiteRest(TOKEN, base_url=server.api_url),
        organization=ORG,
        pipeline=PIPELINE,
        branch="main",
        profile="tiny-cpu",
        step_key=STEP_KEY,
        cache_dir=cache,
        workers=workers,
    )
    spec = TrendSpec(window=builds)
    started = time.perf_counter()
    report = compute_trend(
        results, build_ref(results, BuildRef("tonight")), source.fetch(builds), spec, source.description
    )
    return time.perf_counter() - started, len(server.requests), report


def calls_found(report: TrendReport) -> list[tuple[str, str, str | None]]:
    return sorted((c.case_id, c.metric.key, c.started.label if c.started else None) for c in report.regressions)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", type=int, default=50)
    parser.add_argument("--latency-ms", type=float, default=40.0, help="added to every request of the local API")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="afd-e2e-trend-bench-") as tmp:
        first = 1000
        made = make_history(Path(tmp) / "made", runs=args.builds, first_build=first, slow_from=first + args.builds - 5)
        with local_buildkite(TOKEN, delay_s=args.latency_ms / 1000) as server:
            serve_history(server, made.folder, made.builds, made.messy)
            sides: dict[str, list[tuple[float, int, TrendReport]]] = {"concurrent (8 workers)": [], "one at a time": []}
            for _ in range(args.repeats):
                sides["concurrent (8 workers)"].append(fetch_and_analyse(server, made.tonight, args.builds, 8, None))
                sides["one at a time"].append(fetch_and_analyse(server, made.tonight, args.builds, 1, None))
            cache = Path(tmp) / "cache"
            fetch_and_analyse(server, made.tonight, args.builds, 8, cache)
            sides["second night, cached"] = [fetch_and_analyse(server, made.tonight, args.builds, 8, cache)]

    print(
        f"trend over {args.builds} earlier builds ({len(made.messy)} of them skipped as messy), "
        f"local Buildkite API with {args.latency_ms:g} ms per request, {args.repeats} repeats (median)"
    )
    print(f"{'':28}{'seconds':>10}{'requests':>10}{'runs compared':>15}{'regressions':>13}")
    expected = None
    for name, runs in sides.items():
        seconds = statistics.median(run[0] for run in runs)
        _, requests, report = runs[-1]
        found = calls_found(report)
        expected = expected or found
        print(f"{name:28}{seconds:>10.2f}{requests:>10}{len(report.history):>15}{len(found):>13}")
        if found != expected:
            print(f"FAIL: {name} found {found}, the concurrent side {expected}")
            return 1
    concurrent = statistics.median(run[0] for run in sides["concurrent (8 workers)"])
    serial = statistics.median(run[0] for run in sides["one at a time"])
    started = {label for _, _, label in expected}
    print(
        f"speed-up concurrent vs one at a time: {serial / concurrent:.1f}x; regressions start at {', '.join(sorted(started))}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
