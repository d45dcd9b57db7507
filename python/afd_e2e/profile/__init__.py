"""Profiles: what a model, its hardware, its cases and workloads are, loaded from YAML and validated.

A profile is the only place a model or topology is described. ``model`` holds the records, ``reader`` the typed
YAML walker, ``section_readers`` reads each section, ``rules`` checks across sections, ``load`` finds and reads a file,
``connectors`` holds the AFD connectors' traits. A phase's own ``workloads.<key>`` section is read by the reader its
phase registers; ``bench_spec`` and ``capacity_spec`` hold two of them here, below the phases, because lower layers
read those sections too.
Validation errors are one line naming the file, the key and the fix.
"""

from afd_e2e.profile.load import builtin_profiles, load_profile
from afd_e2e.profile.model import (
    INTERCONNECTS,
    ON_WORSE,
    PLATFORMS,
    SCHEMA_VERSION,
    ArgEdit,
    CaseSpec,
    CheckpointSpec,
    ComparisonSpec,
    DboSpec,
    EngineSpec,
    ExecutionSpec,
    FlightRecorderSpec,
    GateSpec,
    GraphSpec,
    HardwareSpec,
    ModelSpec,
    PlacementSpec,
    Profile,
    ProfilerSpec,
    RoleSpec,
    SoftwareSpec,
    TrendSpec,
)
from afd_e2e.profile.section_readers import parse_profile

__all__ = [
    "INTERCONNECTS",
    "ON_WORSE",
    "PLATFORMS",
    "SCHEMA_VERSION",
    "ArgEdit",
    "CaseSpec",
    "CheckpointSpec",
    "ComparisonSpec",
    "DboSpec",
    "EngineSpec",
    "ExecutionSpec",
    "FlightRecorderSpec",
    "GateSpec",
    "GraphSpec",
    "HardwareSpec",
    "ModelSpec",
    "PlacementSpec",
    "Profile",
    "ProfilerSpec",
    "RoleSpec",
    "SoftwareSpec",
    "TrendSpec",
    "builtin_profiles",
    "load_profile",
    "parse_profile",
]
