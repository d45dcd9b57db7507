"""Typed Buildkite steps (command, block, group) and their rendering to the YAML/JSON that ``pipeline upload`` reads.

Only the fields this generator uses are modelled; each ``to_dict`` leaves out unset fields so the output stays
minimal and validates against Buildkite's official pipeline schema. ``depends_on`` is the exception, always written:
a block step holds every later step that has no explicit dependencies, so each generated step states its own
(none is ``depends_on: null``), and one profile's block never holds another profile's steps.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from afd_e2e.profile import Profile, catalogue

# Buildkite sends a lost agent's job the exit status -1; a real failure must never be retried automatically.
AGENT_LOST_RETRY = {"exit_status": -1, "limit": 1}
# A GPU step's time limit on top of its cases' own budgets: the hooks (gates, preflight, cleanup, report) and slack.
STEP_MARGIN = 1.15
STEP_OVERHEAD_MINUTES = 10


def step_timeout_minutes(profiles: Iterable[Profile]) -> int:
    """``timeout_in_minutes`` from the profiles' budgets: every case's start-up, phases and teardown (and its
    rendezvous, for a case with followers), plus margin."""
    seconds = sum(
        catalogue.case_budget_s(p, case.phases) + (p.budgets.rendezvous_s if case.multi_agent else 0)
        for p in profiles
        for case in p.cases
    )
    return math.ceil(seconds * STEP_MARGIN / 60) + STEP_OVERHEAD_MINUTES


def step_slug(name: str) -> str:
    """A profile name as it may appear in step keys and meta-data keys (letters, digits, ``-``, ``_``)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:60] or "profile"


@dataclass(frozen=True)
class SelectOption:
    label: str
    value: str


@dataclass(frozen=True)
class SelectField:
    """A block step's drop-down; the chosen values become build meta-data under ``key`` (newline-separated)."""

    key: str
    select: str
    options: tuple[SelectOption, ...]
    multiple: bool = False
    default: tuple[str, ...] = ()
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _compact(
            {
                "select": self.select,
                "key": self.key,
                "hint": self.hint,
                "required": True,
                "multiple": self.multiple,
                "default": list(self.default) if self.multiple else (self.default[0] if self.default else None),
                "options": [{"label": o.label, "value": o.value} for o in self.options],
            }
        )


@dataclass(frozen=True)
class BlockStep:
    """Stops the build until a person (of ``allowed_teams``, when given) unblocks it."""

    block: str
    key: str
    prompt: str
    fields: tuple[SelectField, ...] = ()
    allowed_teams: tuple[str, ...] = ()
    depends_on: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return _compact(
            {
                "block": self.block,
                "key": self.key,
                "prompt": self.prompt,
                "blocked_state": "passed",
                "fields": [f.to_dict() for f in self.fields],
                "allowed_teams": list(self.allowed_teams),
            }
        ) | _dependencies(self.depends_on)


@dataclass(frozen=True)
class CommandStep:
    """A job. ``plugins`` maps each plugin reference (``org/name#vX.Y.Z``) to its configuration."""

    label: str
    key: str
    command: str | None = None
    depends_on: tuple[str, ...] = ()
    agents: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    plugins: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    timeout_in_minutes: int | None = None
    priority: int | None = None
    concurrency: int | None = None
    concurrency_group: str | None = None
    concurrency_method: str | None = None  # "ordered" (Buildkite's default) or "eager"
    retry_on_agent_lost: bool = False
    artifact_paths: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.concurrency is None) != (self.concurrency_group is None):
            raise ValueError(f"step {self.key}: concurrency and concurrency_group go together")
        if self.concurrency_method is not None and self.concurrency is None:
            raise ValueError(f"step {self.key}: concurrency_method needs concurrency and concurrency_group")

    def to_dict(self) -> dict[str, Any]:
        return _compact(
            {
                "label": self.label,
                "key": self.key,
                "command": self.command,
                "agents": dict(self.agents),
                "env": dict(self.env),
                "plugins": [{ref: dict(config)} for ref, config in self.plugins.items()],
                "timeout_in_minutes": self.timeout_in_minutes,
                "priority": self.priority,
                "concurrency": self.concurrency,
                "concurrency_group": self.concurrency_group,
                "concurrency_method": self.concurrency_method,
                "retry": {"automatic": [dict(AGENT_LOST_RETRY)]} if self.retry_on_agent_lost else None,
                "artifact_paths": list(self.artifact_paths),
            }
        ) | _dependencies(self.depends_on)


@dataclass(frozen=True)
class GroupStep:
    group: str
    key: str
    steps: tuple[CommandStep | BlockStep, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "key": self.key, "depends_on": None, "steps": [s.to_dict() for s in self.steps]}


Step = CommandStep | BlockStep | GroupStep


@dataclass(frozen=True)
class Pipeline:
    steps: tuple[Step, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"steps": [s.to_dict() for s in self.steps]}


def render(pipeline: Pipeline, fmt: str = "yaml") -> str:
    """YAML or JSON for ``buildkite-agent pipeline upload --no-interpolation``: every string is written literally.

    Upload-time interpolation cannot carry arbitrary text: ``\\$`` and ``$$`` both become ``$``, so no escaping
    keeps a ``\\`` right before a ``$`` (a branch named ``rel\\${SECRET}`` would expand). The output is therefore
    meant for an upload without interpolation, and no command carries a dynamic value (those go in ``env``).
    """
    data = pipeline.to_dict()
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    return yaml.dump(data, Dumper=_BlockTextDumper, sort_keys=False, allow_unicode=True, width=1000)


class _BlockTextDumper(yaml.SafeDumper):
    """Writes multi-line strings (annotation bodies, prompts) as readable ``|`` blocks."""


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_BlockTextDumper.add_representer(str, _represent_str)


def _dependencies(keys: tuple[str, ...]) -> dict[str, Any]:
    return {"depends_on": list(keys) or None}


def _compact(data: dict[str, Any]) -> dict[str, Any]:
    """Drop unset fields: None and empty collections (a 0 or False stays)."""
    return {k: v for k, v in data.items() if v is not None and v != [] and v != {}}
