"""Profiles: what a model, its hardware, its cases and workloads are, loaded from YAML and validated.

A profile is the only place a model or topology is described. ``model`` holds the records, ``reader`` the typed
YAML walker, ``sections`` reads each section, ``rules`` checks across sections, ``load`` finds and reads a file.
Validation errors are one line naming the file, the key and the fix.
"""

from afd_e2e.profile.load import builtin_profiles, load_profile
from afd_e2e.profile.model import (
    BENCH_METRICS,
    INTERCONNECTS,
    ON_WORSE,
    PARITY_MODES,
    PHASES,
    PLATFORMS,
    SCHEMA_VERSION,
    BenchMetric,
    BenchSpec,
    CaseSpec,
    CheckpointSpec,
    ComparisonSpec,
    EngineSpec,
    GateSpec,
    Gsm8kSpec,
    HardwareSpec,
    MetricGate,
    ModelSpec,
    ParitySpec,
    Profile,
    RoleSpec,
    SmokeSpec,
    SoftwareSpec,
    TrendSpec,
)
from afd_e2e.profile.sections import parse_profile

__all__ = [
    "BENCH_METRICS",
    "INTERCONNECTS",
    "ON_WORSE",
    "PARITY_MODES",
    "PHASES",
    "PLATFORMS",
    "SCHEMA_VERSION",
    "BenchMetric",
    "BenchSpec",
    "CaseSpec",
    "CheckpointSpec",
    "ComparisonSpec",
    "EngineSpec",
    "GateSpec",
    "Gsm8kSpec",
    "HardwareSpec",
    "MetricGate",
    "ModelSpec",
    "ParitySpec",
    "Profile",
    "RoleSpec",
    "SmokeSpec",
    "SoftwareSpec",
    "TrendSpec",
    "builtin_profiles",
    "load_profile",
    "parse_profile",
]
