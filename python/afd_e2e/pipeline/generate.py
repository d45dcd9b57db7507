"""From each profile's Decision to the steps it adds to the build: an explanation, a block, the GPU step.

Every profile gets one group, and every profile set one group, so a profile that is not run still shows up, with
the reason in an annotation. In a set's group, one block chooses the cases of all its profiles and each agent pool
gets one GPU step (pools.py).
The annotation steps carry no ``agents`` (they run on the pipeline's default queue, like the generator itself);
only the GPU step targets the profile's agent tags.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from afd_e2e import __version__
from afd_e2e.errors import UsageError
from afd_e2e.pipeline.decide import BLOCK, EXPLAIN, ProfileDecision
from afd_e2e.pipeline.followers import PLUGIN_ENV, leader_concurrency_group, tags_text
from afd_e2e.pipeline.pools import Pool, select_pools
from afd_e2e.pipeline.steps import (
    BlockStep,
    CommandStep,
    GroupStep,
    Pipeline,
    SelectField,
    SelectOption,
    step_slug,
    step_timeout_minutes,
)
from afd_e2e.profile import Profile

PLUGIN_REPOSITORY = "vllm-project/afd-e2e"  # github.com/vllm-project/afd-e2e-buildkite-plugin
DEFAULT_PLUGIN = f"{PLUGIN_REPOSITORY}#v{__version__}"
OUT_DIR = "afd-e2e-out"  # the plugin's out-dir default (plugin.yml)
ANNOTATION_ENV = "AFD_E2E_ANNOTATION"  # an annotation step's body


@dataclass(frozen=True)
class GpuStepSettings:
    plugin: str = DEFAULT_PLUGIN
    timeout_in_minutes: int | None = None  # None: derived from the profiles' budgets (step_timeout_minutes)
    priority: int = 0


def build_pipeline(
    decisions: Sequence[ProfileDecision],
    settings: GpuStepSettings,
    profile_sets: Sequence[tuple[str, Sequence[ProfileDecision]]] = (),
) -> Pipeline:
    """One group per profile set (``(set name, its profiles' decisions)``), then one group per single profile."""
    everything = [*(item for _, items in profile_sets for item in items), *decisions]
    check_distinct([(item.reference, item.profile) for item in everything])
    groups = [set_group(name, items, settings) for name, items in profile_sets]
    return Pipeline((*groups, *(profile_group(item, settings) for item in decisions)))


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
        why = f"**afd-e2e {profile.name}** is not run ({decision.build}): {decision.why}"
        body = f"{why}:\n\n{_bullets(decision.reasons)}"
        steps.append(annotation_step(slug, "info", f":information_source: afd-e2e {profile.name}: not run", body))
    else:
        if decision.warnings:
            body = f"**afd-e2e {profile.name}** ({decision.build}):\n\n{_bullets(decision.warnings)}"
            label = f":warning: afd-e2e {profile.name}: agent check failed"
            steps.append(annotation_step(slug, "warning", label, body))
        if decision.left_out:
            steps.append(left_out_step(slug, profile.name, [item]))
        block = approval_step(slug, item) if decision.action == BLOCK else None
        if block:
            steps.append(block)
        steps.append(gpu_step(slug, item, settings, block))
    return GroupStep(f"afd-e2e {profile.name}", f"afd-e2e-{slug}", tuple(steps))


def set_group(name: str, items: Sequence[ProfileDecision], settings: GpuStepSettings) -> GroupStep:
    """A profile set as one group: why some profiles are not run, one block choosing the cases of all the others,
    and one GPU step per agent pool (profiles that need the same agents share it)."""
    selection = select_pools(items)
    slug = f"set-{step_slug(name)}"
    build = items[0].decision.build if items else ""
    steps: list[CommandStep | BlockStep] = []
    if selection.explained:
        lines = [
            f"**{i.profile.name}**: {i.decision.cause}: {'; '.join(i.decision.reasons)}" for i in selection.explained
        ]
        remedies = "".join(  # once for the set, not on each profile's line
            f"\n\nWhere gates are closed: {remedy}."
            for remedy in dict.fromkeys(i.decision.remedy for i in selection.explained)
            if remedy
        )
        body = f"**afd-e2e {name}**: profiles not run ({build}):\n\n{_bullets(lines)}{remedies}"
        label = f":information_source: afd-e2e {name}: {len(selection.explained)} profile(s) not run"
        steps.append(annotation_step(slug, "info", label, body))
    warnings = tuple(dict.fromkeys(w for pool in selection.pools for w in pool.warnings))
    if warnings:
        body = f"**afd-e2e {name}** ({build}):\n\n{_bullets(warnings)}"
        steps.append(annotation_step(slug, "warning", f":warning: afd-e2e {name}: agent check failed", body))
    if capped := [m for pool in selection.pools for m in pool.members if m.decision.left_out]:
        steps.append(left_out_step(slug, name, capped))
    block = set_approval_step(name, slug, selection.blocked) if selection.blocked else None
    if block:
        steps.append(block)
    for pool in selection.pools:
        steps.append(pool_step(slug, pool, settings, block if pool.action == BLOCK else None))
    return GroupStep(f"afd-e2e {name}", f"afd-e2e-{slug}", tuple(steps))


def set_approval_step(name: str, slug: str, pools: Sequence[Pool]) -> BlockStep:
    """One block for the set: a person picks the cases (``<profile>/<case>``) of every profile behind it."""
    decision = pools[0].members[0].decision
    where = [f"{', '.join(m.profile.name for m in pool.members)} on an agent with {pool.tags_text}" for pool in pools]
    reasons = tuple(dict.fromkeys(r for pool in pools for m in pool.members for r in m.decision.reasons))
    members = [m for pool in pools for m in pool.members]
    return BlockStep(
        block=f"Run afd-e2e {name}?",
        key=f"afd-e2e-{slug}-approve",
        prompt=f"Run the GPU tests of {name}? This is a {decision.build}:\n"
        + _bullets(list(dict.fromkeys([*where, *reasons, *(w for pool in pools for w in pool.warnings)]))),
        fields=(
            SelectField(
                key=cases_meta_data_key(slug),
                select="Cases",
                hint="The cases to run, per profile; comparisons need both of their cases. A profile with none "
                "chosen is not run.",
                options=tuple(
                    SelectOption(f"{m.profile.name}: {c.id}: {c.label}", qualified_case(m.reference, c.id))
                    for m in members
                    for c in m.offered
                ),
                multiple=True,
                default=tuple(qualified_case(m.reference, c.id) for m in members for c in m.offered),
            ),
        ),
        allowed_teams=decision.allowed_teams,
    )


def pool_step(slug: str, pool: Pool, settings: GpuStepSettings, block: BlockStep | None) -> CommandStep:
    """One job on the pool's agents that runs its profiles one after another (each in its own out-dir folder)."""
    references = [m.reference for m in pool.members]
    config: dict[str, str | list[str]] = {"profile": references[0] if len(references) == 1 else references}
    if block:
        config["cases-meta-data"] = cases_meta_data_key(slug)
    env: dict[str, str] = {}
    for member in pool.members:
        env |= member.decision.gate_env
    if any(m.profile.multi_agent for m in pool.members):
        env[PLUGIN_ENV] = settings.plugin
    results = OUT_DIR if len(references) == 1 else f"{OUT_DIR}/*"
    return CommandStep(
        label=f"afd-e2e {', '.join(m.profile.name for m in pool.members)}" + (" (leader)" if PLUGIN_ENV in env else ""),
        key=f"afd-e2e-{slug}-{step_slug(pool.tags_text)}-{pool.action}",
        depends_on=(block.key,) if block else (),
        agents=dict(pool.agent_tags),
        env=env,
        plugins={settings.plugin: config},
        timeout_in_minutes=settings.timeout_in_minutes or step_timeout_minutes(m.profile for m in pool.members),
        priority=settings.priority,
        concurrency=1,
        concurrency_group=leader_concurrency_group(m.profile for m in pool.members),
        retry_on_agent_lost=True,
        artifact_paths=(f"{results}/results.json", f"{results}/logs/**/*"),
    )


def qualified_case(reference: str, case_id: str) -> str:
    """A case of a set's profile as the block step stores it and the plugin reads it: ``<profile slug>/<case>``."""
    return f"{step_slug(reference)}/{case_id}"


def annotation_step(slug: str, style: str, label: str, body: str) -> CommandStep:
    """A light job whose only work is to put ``body`` on the build page.

    The body (branch names, agent names, gate values: text no one here wrote) travels as a literal ``env`` value and
    reaches ``buildkite-agent annotate`` on stdin, so the command itself is a constant that no value can break out of.
    """
    key = f"afd-e2e-{slug}-{style}"
    command = f"printenv {ANNOTATION_ENV} | buildkite-agent annotate --style {style} --context {key}"
    return CommandStep(label=label, key=key, command=command, env={ANNOTATION_ENV: body})


def left_out_step(slug: str, name: str, items: Sequence[ProfileDecision]) -> CommandStep:
    """The cases a pull request's GPU cap keeps out of the block, each with its reason: a case this build does not
    offer is said on the build page, not silently missing from the list."""
    lines = [f"**{m.profile.name}**: {why}" for m in items for why in m.decision.left_out.values()]
    body = f"**afd-e2e {name}**: cases left out ({items[0].decision.build}):\n\n{_bullets(lines)}"
    label = f":information_source: afd-e2e {name}: {len(lines)} case(s) left out"
    return annotation_step(f"{slug}-left-out", "info", label, body)


def approval_step(slug: str, item: ProfileDecision) -> BlockStep:
    profile, decision = item.profile, item.decision
    tags = tags_text(profile.agent_tags)
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
                options=tuple(SelectOption(f"{c.id}: {c.label}", c.id) for c in item.offered),
                multiple=True,
                default=tuple(c.id for c in item.offered),
            ),
        ),
        allowed_teams=decision.allowed_teams,
    )


def gpu_step(slug: str, item: ProfileDecision, settings: GpuStepSettings, block: BlockStep | None) -> CommandStep:
    """The plugin's job on the profile's agents: one job per agent pool set at a time, retried only on agent loss.

    A profile that places a process on another agent pool makes this job the cases' leader: it runs the workloads,
    hosts its own roles and uploads the followers at run time (followers.py), with the plugin reference in its env.
    """
    profile = item.profile
    config: dict[str, str] = {"profile": item.reference}
    if block:
        config["cases-meta-data"] = cases_meta_data_key(slug)
    env = dict(item.decision.gate_env)
    if profile.multi_agent:
        env[PLUGIN_ENV] = settings.plugin
    return CommandStep(
        label=f"afd-e2e {profile.name}" + (" (leader)" if profile.multi_agent else ""),
        key=f"afd-e2e-{slug}-run",
        depends_on=(block.key,) if block else (),
        agents=dict(profile.agent_tags),
        env=env,
        plugins={settings.plugin: config},
        timeout_in_minutes=settings.timeout_in_minutes or step_timeout_minutes([profile]),
        priority=settings.priority,
        concurrency=1,
        concurrency_group=leader_concurrency_group([profile]),
        retry_on_agent_lost=True,
        artifact_paths=(f"{OUT_DIR}/results.json", f"{OUT_DIR}/logs/**/*"),
    )


def cases_meta_data_key(slug: str) -> str:
    return f"afd-e2e-cases-{slug}"


def _bullets(lines: Sequence[str]) -> str:
    return "\n".join(f"- {line}" for line in lines)
