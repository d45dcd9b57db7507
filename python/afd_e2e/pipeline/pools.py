"""The selection for a profile set: which profiles are explained away, and which agent pools run the others.

Profiles that target the same agent tags and were decided alike (run, or block-then-run) share one GPU step: one job
on one agent of that pool runs them one after another, instead of several jobs queueing for the same machines.
Profiles explained away (closed gates, no agent, a fork without teams) stay listed, with their reasons.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from afd_e2e.pipeline.decide import BLOCK, EXPLAIN, ProfileDecision
from afd_e2e.pipeline.followers import tags_text


@dataclass(frozen=True)
class Pool:
    agent_tags: tuple[tuple[str, str], ...]  # sorted
    action: str  # RUN or BLOCK
    members: tuple[ProfileDecision, ...]

    @property
    def tags_text(self) -> str:
        return tags_text(dict(self.agent_tags))

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(w for m in self.members for w in m.decision.warnings))


@dataclass(frozen=True)
class SetSelection:
    explained: tuple[ProfileDecision, ...]
    pools: tuple[Pool, ...]

    @property
    def blocked(self) -> tuple[Pool, ...]:
        return tuple(pool for pool in self.pools if pool.action == BLOCK)


def select_pools(items: Sequence[ProfileDecision]) -> SetSelection:
    """Group the profiles to run by (agent tags, action), in the order they were given."""
    pools: dict[tuple[tuple[tuple[str, str], ...], str], list[ProfileDecision]] = {}
    explained = []
    for item in items:
        if item.decision.action == EXPLAIN:
            explained.append(item)
            continue
        tags = tuple(sorted(item.profile.agent_tags.items()))
        pools.setdefault((tags, item.decision.action), []).append(item)
    return SetSelection(
        tuple(explained), tuple(Pool(tags, action, tuple(members)) for (tags, action), members in pools.items())
    )
