"""From each profile's Decision to the steps it adds to the build: an explanation, a block, the GPU step.

Every profile gets one group, so a profile that is not run still shows up, with the reason in an annotation.
The annotation steps carry no ``agents`` (they run on the pipeline's default queue, like the generator itself);
only the GPU step targets the profile's agent tags.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from afd_e2e import __version__
from afd_e2e.errors import UsageError
from afd_e2e.pipeline.decide import BLOCK, EXPLAIN, Decision
from afd_e2e.pipeline.steps import BlockStep, CommandStep, GroupStep, Pipeline, SelectField, SelectOption
from afd_e2e.profile import Profile

PLUGIN_REPOSITORY = "vllm-project/afd-e2e"  # github.com/vllm-project/afd-e2e-buildkite-plugin
DEFAULT_PLUGIN = f"{PLUGIN_REPOSITORY}#v{__version__}"
OUT_DIR = "afd-e2e-out"  # the plugin's out-dir default (plugin.yml)
ANNOTATION_ENV = "AFD_E2E_ANNOTATION"  # an annotation step's body


@dataclass(frozen=True)
class GpuStepSettings:
    plugin: str = DEFAULT_PLUGIN
    timeout_in_minutes: int = 360
    priority: int = 0


@dataclass(frozen=True)
class ProfileDecision:
    """A profile as the plugin should load it (name or path), the loaded profile, and what was decided for it."""

    reference: str
    profile: Profile
    decision: Decision


def build_pipeline(decisions: Sequence[ProfileDecision], settings: GpuStepSettings) -> Pipeline:
    check_distinct([(item.reference, item.profile) for item in decisions])
    return Pipeline(tuple(profile_group(item, settings) for item in decisions))


def check_distinct(profiles: Sequence[tuple[str, Profile]]) -> None:
    """Each profile once (given by name or path): Buildkite rejects an upload whose step keys repeat."""
    seen: dict[str, tuple[str, Profile]] = {}
    for reference, profile in profiles:
        slug = step_slug(profile.name)
        if slug not in seen:
            seen[slug] = (reference, profile)
            continue
        earlier_reference, earlier = seen[slug]
        if earlier.name == profile.name:
            raise UsageError(
                f"profile {profile.name} is given twice ({earlier_reference!r} and {reference!r})",
                "give each profile once",
            )
        raise UsageError(
            f"profiles {earlier.name!r} and {profile.name!r} share the step key afd-e2e-{slug}", "rename one of them"
        )


def profile_group(item: ProfileDecision, settings: GpuStepSettings) -> GroupStep:
    profile, decision = item.profile, item.decision
    slug = step_slug(profile.name)
    steps: list[CommandStep | BlockStep] = []
    if decision.action == EXPLAIN:
        body = f"**afd-e2e {profile.name}** is not run in this {decision.build}:\n\n{_bullets(decision.reasons)}"
        steps.append(annotation_step(slug, "info", f":information_source: afd-e2e {profile.name}: not run", body))
    else:
        if decision.warnings:
            body = f"**afd-e2e {profile.name}** ({decision.build}):\n\n{_bullets(decision.warnings)}"
            label = f":warning: afd-e2e {profile.name}: agent check failed"
            steps.append(annotation_step(slug, "warning", label, body))
        block = approval_step(slug, profile, decision) if decision.action == BLOCK else None
        if block:
            steps.append(block)
        steps.append(gpu_step(slug, item, settings, block))
    return GroupStep(f"afd-e2e {profile.name}", f"afd-e2e-{slug}", tuple(steps))


def annotation_step(slug: str, style: str, label: str, body: str) -> CommandStep:
    """A light job whose only work is to put ``body`` on the build page.

    The body (branch names, agent names, gate values: text no one here wrote) travels as a literal ``env`` value and
    reaches ``buildkite-agent annotate`` on stdin, so the command itself is a constant that no value can break out of.
    """
    key = f"afd-e2e-{slug}-{style}"
    command = f"printenv {ANNOTATION_ENV} | buildkite-agent annotate --style {style} --context {key}"
    return CommandStep(label=label, key=key, command=command, env={ANNOTATION_ENV: body})


def approval_step(slug: str, profile: Profile, decision: Decision) -> BlockStep:
    tags = _tags(profile)
    return BlockStep(
        block=f"Run afd-e2e {profile.name}?",
        key=f"afd-e2e-{slug}-approve",
        prompt=f"Run the GPU tests of {profile.name} on an agent with {tags}? This is a {decision.build}:\n"
        + _bullets(decision.reasons + decision.warnings),
        fields=(
            SelectField(
                key=cases_meta_data_key(slug),
                select="Cases",
                hint="The cases to run; comparisons need both of their cases.",
                options=tuple(SelectOption(f"{c.id}: {c.label}", c.id) for c in profile.cases),
                multiple=True,
                default=tuple(c.id for c in profile.cases),
            ),
        ),
        allowed_teams=decision.allowed_teams,
    )


def gpu_step(slug: str, item: ProfileDecision, settings: GpuStepSettings, block: BlockStep | None) -> CommandStep:
    """The plugin's job on the profile's agents: one job per agent pool at a time, retried only on agent loss."""
    config: dict[str, str] = {"profile": item.reference}
    if block:
        config["cases-meta-data"] = cases_meta_data_key(slug)
    return CommandStep(
        label=f"afd-e2e {item.profile.name}",
        key=f"afd-e2e-{slug}-run",
        depends_on=(block.key,) if block else (),
        agents=dict(item.profile.agent_tags),
        env=dict(item.decision.gate_env),
        plugins={settings.plugin: config},
        timeout_in_minutes=settings.timeout_in_minutes,
        priority=settings.priority,
        concurrency=1,
        concurrency_group=f"afd-e2e/{_tags(item.profile)}",
        retry_on_agent_lost=True,
        artifact_paths=(f"{OUT_DIR}/results.json", f"{OUT_DIR}/logs/**/*"),
    )


def step_slug(name: str) -> str:
    """A profile name as it may appear in step keys and meta-data keys (letters, digits, ``-``, ``_``)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:60] or "profile"


def cases_meta_data_key(slug: str) -> str:
    return f"afd-e2e-cases-{slug}"


def _tags(profile: Profile) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(profile.agent_tags.items())) or "queue=default"


def _bullets(lines: Sequence[str]) -> str:
    return "\n".join(f"- {line}" for line in lines)
