"""What one run contributes to a trend: which build it was, what it ran on, and one number per case and metric.

Runs are compared only within one identity (profile name, profile revision, hardware): a run of another revision
or on other GPUs is shown apart, never mixed into the history. The profile revision is a digest of the plan with
the run-specific parts (model path, ports, URLs) taken out, so editing a case's topology or arguments starts a new
history while moving the checkpoint does not.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from afd_e2e.results import RunResults, Status, gsm8k_records
from afd_e2e.results.capacity_records import BRACKETED, CaseCapacity
from afd_e2e.results.codec import to_json
from afd_e2e.results.gsm8k_records import Gsm8kResult
from afd_e2e.results.model import CaseResults
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.results.performance_records import CasePerformance

# The bench metrics followed, then the case-level ones; ``True`` when higher is better.
BENCH_METRICS = {
    "request_throughput": ("Request throughput", "req/s", True),
    "output_throughput": ("Output throughput", "tok/s", True),
    "mean_ttft_ms": ("Mean TTFT", "ms", False),
    "mean_tpot_ms": ("Mean TPOT", "ms", False),
    "mean_itl_ms": ("Mean ITL", "ms", False),
    "mean_e2el_ms": ("Mean E2E latency", "ms", False),
}
CASE_METRICS = {
    "capacity_at_slo": ("Capacity at SLO", "load", True),  # in the sweep's own unit (req/s or concurrency)
    "gsm8k_strict_match": ("GSM8K strict match", "share", True),
    "ready_s": ("Ready time", "s", False),
    "teardown_s": ("Teardown", "s", False),
}
METRICS = {**BENCH_METRICS, **CASE_METRICS}


@dataclass(frozen=True)
class Metric:
    key: str
    name: str
    unit: str
    higher_is_better: bool


def metric(key: str) -> Metric:
    name, unit, higher = METRICS[key]
    return Metric(key, name, unit, higher)


@dataclass(frozen=True)
class BuildRef:
    """The build a run came from: ``number`` and ``url`` when Buildkite knows it, else a label (a folder name)."""

    label: str
    number: int | None = None
    url: str | None = None
    commit: str | None = None
    created_at: str | None = None


@dataclass(frozen=True)
class Identity:
    """What must match for two runs to be compared."""

    profile: str
    revision: str
    hardware: str

    def differences(self, other: Identity) -> list[str]:
        """One phrase per differing part, naming both sides (``other`` is tonight's)."""
        return [
            f"{what} {mine} (tonight {theirs})"
            for what, mine, theirs in (
                ("profile", self.profile, other.profile),
                ("profile revision", self.revision, other.revision),
                ("hardware", self.hardware, other.hardware),
            )
            if mine != theirs
        ]


@dataclass(frozen=True)
class RunPoint:
    """One run's values: ``values[(case_id, metric_key)]``."""

    build: BuildRef
    identity: Identity
    values: Mapping[tuple[str, str], float]
    baseline: bool = True  # the run passed or warned: it may form a regression episode's baseline


_VOLATILE_PROCESS_KEYS = ("api_port", "connector_ports", "devices")
_VOLATILE_CASE_KEYS = ("base_url", "ready_url")
# Keys added later whose empty value is what older plans meant: left out when empty, so a single-agent plan keeps
# the revision it had before placement existed.
_LATER_KEYS = {"placement": None, "rendezvous": {}}


def _without_empty_later_keys(record: dict) -> dict:
    return {k: v for k, v in record.items() if not (k in _LATER_KEYS and v == _LATER_KEYS[k])}


def profile_revision(results: RunResults) -> str:
    """A short digest of the plan without the model path, ports, URLs and device ids."""
    plan = to_json(results.plan)
    cases = []
    for case_plan, case in zip(results.plan.cases, plan["cases"], strict=True):
        ports = {str(port) for port in case_plan.ports}
        processes = [
            {
                **{k: v for k, v in _without_empty_later_keys(process).items() if k not in _VOLATILE_PROCESS_KEYS},
                "argv": [
                    "<model>" if arg == results.plan.model_path else "<port>" if arg in ports else arg
                    for arg in process["argv"]
                ],
            }
            for process in case["processes"]
        ]
        kept = {k: v for k, v in _without_empty_later_keys(case).items() if k not in _VOLATILE_CASE_KEYS}
        cases.append({**kept, "processes": processes})
    digest_input = json.dumps({"cases": cases, "comparisons": plan["comparisons"]}, sort_keys=True)
    return hashlib.sha256(digest_input.encode()).hexdigest()[:10]


def hardware_identity(results: RunResults) -> str:
    """``8x NVIDIA H200, driver 580`` (the driver's major version), or the platform (``cpu``) without GPUs."""
    gpus = results.environment.gpus
    if not gpus:
        return results.platform
    names = sorted({gpu.name for gpu in gpus})
    driver = (results.environment.driver or "unknown").split(".")[0]
    return f"{len(gpus)}x {' + '.join(names)}, driver {driver}"


def identity(results: RunResults) -> Identity:
    return Identity(results.profile, profile_revision(results), hardware_identity(results))


def case_values(case: CaseResults) -> dict[str, float]:
    """The trend metrics one case recorded: each bench metric's mean over the passed repetitions, the capacity at
    SLO its sweep bracketed, GSM8K strict match, ready time and teardown (a metric the case did not reach is
    absent)."""
    values = {}
    performance: CasePerformance | None = case.section(PERFORMANCE)
    repetitions = [rep for rep in (performance.repetitions if performance else []) if rep.status is Status.PASSED]
    for key in BENCH_METRICS:
        measured = [rep.metrics[key] for rep in repetitions if key in rep.metrics]
        if measured:
            values[key] = statistics.fmean(measured)
    capacity: CaseCapacity | None = case.section("capacity")
    estimate = capacity.estimate if capacity is not None else None
    if estimate is not None and estimate.outcome == BRACKETED and estimate.capacity is not None:
        values["capacity_at_slo"] = estimate.capacity  # a one-sided bound (never met or missed) is not a value
    graded: Gsm8kResult | None = case.section(gsm8k_records.SECTION)
    if graded is not None and graded.status in (Status.PASSED, Status.FAILED) and graded.total:
        values["gsm8k_strict_match"] = graded.correct / graded.total
    if case.timings.launch_to_ready_s is not None:
        values["ready_s"] = case.timings.launch_to_ready_s
    if case.timings.teardown_s is not None:
        values["teardown_s"] = case.timings.teardown_s
    return values


def run_point(results: RunResults, build: BuildRef) -> RunPoint:
    values = {
        (case_id, key): value for case_id, case in results.cases.items() for key, value in case_values(case).items()
    }
    baseline = results.status in (Status.PASSED, Status.WARNED)
    return RunPoint(build=build, identity=identity(results), values=values, baseline=baseline)
