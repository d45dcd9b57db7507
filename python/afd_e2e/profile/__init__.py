"""Profiles: what a model, its hardware, its cases and workloads are, loaded from YAML and validated.

A profile is the only place a model or topology is described. ``model`` holds the records, ``reader`` the typed
YAML walker, ``sections`` reads each section, ``rules`` checks across sections, ``load`` finds and reads a file.
Validation errors are one line naming the file, the key and the fix.
"""

from afd_e2e.profile.load import builtin_profiles, load_profile
from afd_e2e.profile.model import (
    INTERCONNECTS,
    MEASURES,
    PHASES,
    PLATFORMS,
    SCHEMA_VERSION,
    ArgEdit,
    BenchSpec,
    CaseSpec,
    CheckpointSpec,
    ComparisonSpec,
    DboSpec,
    EngineSpec,
    GateSpec,
    GraphSpec,
    Gsm8kSpec,
    HardwareSpec,
    ModelSpec,
    ParitySpec,
    Profile,
    ProfilerSpec,
    ReplaySpec,
    RoleSpec,
    ServingSpec,
    SmokeSpec,
    SoftwareSpec,
    TrendSpec,
)
from afd_e2e.profile.sections import parse_profile

__all__ = [
    "INTERCONNECTS",
    "MEASURES",
    "PHASES",
    "PLATFORMS",
    "SCHEMA_VERSION",
    "ArgEdit",
    "BenchSpec",
    "CaseSpec",
    "CheckpointSpec",
    "ComparisonSpec",
    "DboSpec",
    "EngineSpec",
    "GateSpec",
    "GraphSpec",
    "Gsm8kSpec",
    "HardwareSpec",
    "ModelSpec",
    "ParitySpec",
    "Profile",
    "ProfilerSpec",
    "ReplaySpec",
    "RoleSpec",
    "ServingSpec",
    "SmokeSpec",
    "SoftwareSpec",
    "TrendSpec",
    "builtin_profiles",
    "load_profile",
    "parse_profile",
]
