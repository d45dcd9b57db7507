"""The loop closed: a nightly whose trend opened a regression episode gets a bisect step (docs/bisect.md).

``select_bisects`` (pure) picks, from the episodes opened tonight, one bisect per case: the first regressed bench
metric in the order ``PREFERRED`` (TPOT first: it moves with every engine step, so it is what a per-step change shows
most clearly; the others usually moved with it), between the last good and the first bad builds' commits. Every
episode not selected is explained (another metric of the same case is bisected, not a bench metric, a build
without a commit, both builds on one commit). ``bisect_pipeline`` turns the selection into steps: a block step by
default (``Bisect tpot regression a1b2c3..d4e5f6 on <agent>?``), none where the profile says ``trend.bisect:
unattended``; the command step runs on an agent with the profile's tags, in the GPU queue's concurrency group (so
it never overlaps a nightly), and puts the bisect's section (probe table, first bad commit) on the build page.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from afd_e2e.errors import UsageError
from afd_e2e.pipeline.followers import leader_concurrency_group, tags_text
from afd_e2e.pipeline.generate import annotation_step
from afd_e2e.pipeline.steps import BlockStep, CommandStep, GroupStep, Pipeline, step_slug
from afd_e2e.profile import Profile
from afd_e2e.profile.bench_spec import BENCH_METRICS

if TYPE_CHECKING:  # the trend's record, for annotations only: the generator hands the episodes in
    from afd_e2e.trend.episodes import Episode

PREFERRED = ("mean_tpot_ms", "mean_itl_ms", "mean_ttft_ms", "mean_e2el_ms", "output_throughput", "request_throughput")
BISECT_OUT = "afd-e2e-bisect"
REPO_ENV = "AFD_E2E_BISECT_REPO"  # on the agent: the git checkout of the package to bisect
SHORT = 6


@dataclass(frozen=True)
class BisectOffer:
    case_id: str
    metric: str
    good: str  # the last good build's commit
    bad: str  # the first bad build's commit
    episode: Episode


@dataclass(frozen=True)
class BisectSelection:
    offers: tuple[BisectOffer, ...]
    not_offered: tuple[str, ...]  # one sentence per episode without a step of its own


def _rank(key: str) -> int:
    return PREFERRED.index(key) if key in PREFERRED else len(PREFERRED)


def select_bisects(opened: Sequence[Episode]) -> BisectSelection:
    """One offer per case from the episodes opened tonight; every other episode with the reason it has none."""
    bench = {m.key for m in BENCH_METRICS}
    offers: dict[str, BisectOffer] = {}
    why: list[str] = []
    for episode in sorted(opened, key=lambda e: (e.case_id, _rank(e.metric.key))):
        name = f"{episode.case_id} {episode.metric.key}"
        good, bad = episode.last_good.commit, episode.first_bad.commit
        if episode.metric.key not in bench:
            why.append(f"{name}: not a bench metric, which a bisect measures at each commit")
        elif not good or not bad:
            missing = episode.last_good if not good else episode.first_bad
            why.append(f"{name}: build {missing.label} recorded no commit")
        elif good == bad:
            why.append(f"{name}: the last good and first bad builds ran one commit ({good[:12]}): nothing to bisect")
        elif episode.case_id in offers:
            why.append(f"{name}: the case's {offers[episode.case_id].metric} regression is bisected instead")
        else:
            offers[episode.case_id] = BisectOffer(episode.case_id, episode.metric.key, good, bad, episode)
    return BisectSelection(tuple(offers.values()), tuple(why))


def check_nightly_matches(selection: BisectSelection, profile: Profile, reference: str, nightly_profile: str) -> None:
    """The nightly's trend is of this profile and every offered case is one of its cases: another profile's trend
    would put that profile's case on this profile's agents (a CPU case on a GPU queue), or a case it does not have."""
    fix = f"pass --profile {nightly_profile}, the profile the nightly in --bisect-from ran"
    if nightly_profile != profile.name:
        raise UsageError(f"--bisect-from holds a trend of profile {nightly_profile}, not of --profile {reference}", fix)
    cases = {case.id for case in profile.cases}
    missing = [offer.case_id for offer in selection.offers if offer.case_id not in cases]
    if missing:
        raise UsageError(
            f"--bisect-from's regression is in case {', '.join(missing)}, which profile {profile.name} "
            f"(--profile {reference}) does not have",
            f"{fix}, at the revision that has the case",
        )


def _short_name(metric: str) -> str:
    return metric.removeprefix("mean_").removesuffix("_ms")


def bisect_block(offer: BisectOffer, agent: str, key: str) -> BlockStep:
    label = f"Bisect {_short_name(offer.metric)} regression {offer.good[:SHORT]}..{offer.bad[:SHORT]} on {agent}?"
    return BlockStep(
        block=label,
        key=key,
        prompt=(
            f"Case {offer.case_id}: {offer.episode.metric.name} moved {offer.episode.worst_pct:+.1f}% from build "
            f"{offer.episode.first_bad.label} on. Bisect between {offer.good} (build {offer.episode.last_good.label}) "
            f"and {offer.bad}? Each probe is one run of the case on a GPU agent."
        ),
    )


def bisect_command(profile_reference: str, offer: BisectOffer) -> str:
    argv = ["afd-e2e", "bisect", "--profile", profile_reference, "--case", offer.case_id, "--metric", offer.metric]
    argv += ["--good", offer.good, "--bad", offer.bad, "--out", BISECT_OUT]
    argv += ["--regression-pct", f"{abs(offer.episode.worst_pct):.1f}"]  # hunt the size of move the trend saw
    quoted = " ".join(shlex.quote(a) for a in argv)
    # uploaded from inside the folder, so the section's artifact:// links (bisect.png) resolve
    publish = (
        f"cd {BISECT_OUT} && buildkite-agent artifact upload 'bisect.*' && "
        f"buildkite-agent annotate --context afd-e2e-bisect-{step_slug(offer.case_id)} < bisect.md"
    )
    return f'{quoted} --repo "${REPO_ENV}"; status=$?; {publish}; exit $status'


def bisect_pipeline(
    selection: BisectSelection, profile: Profile, profile_reference: str, agent: str, *, timeout_in_minutes: int
) -> Pipeline:
    """The steps for the selection: per offer a block (unless ``trend.bisect: unattended``) and the bisect job."""
    slug = step_slug(profile_reference)
    steps: list[BlockStep | CommandStep] = []
    for offer in selection.offers:
        key = f"afd-e2e-{slug}-bisect-{step_slug(offer.case_id)}"
        block = None if profile.trend.bisect == "unattended" else bisect_block(offer, agent, f"{key}-approve")
        if block is not None:
            steps.append(block)
        steps.append(
            CommandStep(
                label=f"afd-e2e bisect {profile.name} {offer.case_id} {_short_name(offer.metric)}",
                key=key,
                command=bisect_command(profile_reference, offer),
                depends_on=(block.key,) if block else (),
                agents=dict(profile.agent_tags),
                timeout_in_minutes=timeout_in_minutes,
                concurrency=1,
                concurrency_group=leader_concurrency_group([profile]),
                retry_on_agent_lost=True,
                artifact_paths=(f"{BISECT_OUT}/cache/runs/**/results.json",),
            )
        )
    if selection.not_offered:
        body = "Regression episodes opened tonight without a bisect step of their own:\n" + "\n".join(
            f"- {line}" for line in selection.not_offered
        )
        steps.append(annotation_step(f"{slug}-bisect", "info", "afd-e2e: why no bisect", body))
    if not steps:
        return Pipeline(())
    label = f"afd-e2e bisect {profile.name} on an agent with {tags_text(profile.agent_tags)}"
    return Pipeline((GroupStep(group=label, key=f"afd-e2e-{slug}-bisect", steps=tuple(steps)),))
