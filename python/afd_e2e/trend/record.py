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
from typing import Any

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


_VOLATILE_PROCESS_KEYS = ("api_port", "connector_ports", "devices")
_VOLATILE_CASE_KEYS = ("base_url", "ready_url")


def profile_revision(results: Mapping[str, Any]) -> str:
    """A short digest of the plan without the model path, ports, URLs and device ids."""
    plan = results.get("plan") or {}
    model_path = plan.get("model_path") or ""
    cases = []
    for case in plan.get("cases") or []:
        ports = set()
        processes = []
        for process in case.get("processes") or []:
            ports |= {str(process.get("api_port"))} | {str(p) for p in process.get("connector_ports") or ()}
            processes.append({k: v for k, v in process.items() if k not in _VOLATILE_PROCESS_KEYS})
        for process in processes:
            process["argv"] = [
                "<model>" if arg == model_path else "<port>" if arg in ports else arg
                for arg in process.get("argv") or []
            ]
        cases.append({**{k: v for k, v in case.items() if k not in _VOLATILE_CASE_KEYS}, "processes": processes})
    digest_input = json.dumps({"cases": cases, "comparisons": plan.get("comparisons")}, sort_keys=True, default=str)
    return hashlib.sha256(digest_input.encode()).hexdigest()[:10]


def hardware_identity(results: Mapping[str, Any]) -> str:
    """``8x NVIDIA H200, driver 580`` (the driver's major version), or ``cpu`` for CPU runs."""
    environment = results.get("environment") or {}
    gpus = environment.get("gpus") or []
    if not gpus:
        return str(results.get("platform") or "cpu")
    names = sorted({str(gpu.get("name")) for gpu in gpus})
    driver = str(environment.get("driver") or "unknown").split(".")[0]
    return f"{len(gpus)}x {' + '.join(names)}, driver {driver}"


def identity(results: Mapping[str, Any]) -> Identity:
    return Identity(str(results.get("profile")), profile_revision(results), hardware_identity(results))


def _bench_means(case: Mapping[str, Any]) -> dict[str, float]:
    """Each bench metric's mean over the case's passed repetitions."""
    repetitions = [
        rep for rep in (case.get("performance") or {}).get("repetitions") or [] if rep.get("status") == "passed"
    ]
    means = {}
    for key in BENCH_METRICS:
        values = [v for rep in repetitions if (v := _number((rep.get("metrics") or {}).get(key))) is not None]
        if values:
            means[key] = statistics.fmean(values)
    return means


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def case_values(case: Mapping[str, Any]) -> dict[str, float]:
    """The trend metrics one case recorded (a metric it did not reach is absent)."""
    values = _bench_means(case)
    gsm8k = case.get("gsm8k") or {}
    total = _number(gsm8k.get("total"))
    if gsm8k.get("status") in ("passed", "failed") and total:
        values["gsm8k_strict_match"] = (_number(gsm8k.get("correct")) or 0.0) / total
    timings = case.get("timings") or {}
    for key, field in (("ready_s", "launch_to_ready_s"), ("teardown_s", "teardown_s")):
        if (value := _number(timings.get(field))) is not None:
            values[key] = value
    return values


def run_point(results: Mapping[str, Any], build: BuildRef) -> RunPoint:
    values = {
        (case_id, key): value
        for case_id, case in (results.get("cases") or {}).items()
        for key, value in case_values(case).items()
    }
    return RunPoint(build=build, identity=identity(results), values=values)
