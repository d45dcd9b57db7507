"""Is an agent that can take the GPU step connected? Pure matching of agents' tags against a profile's ``agent_tags``.

Buildkite targets a step at agents having all its ``agents`` tags; a wanted value may be a glob (``"*"``: any).
An agent reports its tags as ``meta_data``: a list of ``key=value`` strings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from afd_e2e.buildkite.agent_tags import tags_satisfy

FOUND, NONE, UNKNOWN = "found", "none", "unknown"


@dataclass(frozen=True)
class Agent:
    name: str
    connection_state: str
    meta_data: tuple[str, ...]


@dataclass(frozen=True)
class AgentAvailability:
    """``found``/``none`` after a successful check; ``unknown`` when the check could not be made (``detail`` says why)."""

    status: str
    detail: str


# Given the wanted tags, say whether a matching agent is connected. The CLI passes the REST client's lookup.
AgentsLookup = Callable[[Mapping[str, str]], AgentAvailability]


def agent_matches(meta_data: Sequence[str], wanted: Mapping[str, str]) -> bool:
    """True when every wanted tag is among the agent's ``key=value`` meta-data (values may be globs)."""
    tags: dict[str, str] = {}
    for item in meta_data:
        key, sep, value = item.partition("=")
        if sep:
            tags[key] = value
    return tags_satisfy(tags, wanted)


def describe_tags(wanted: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(wanted.items())) or "any tags"


def availability(agents: Sequence[Agent], wanted: Mapping[str, str]) -> AgentAvailability:
    """Summarise which connected agents match ``wanted``, naming a few of them."""
    connected = [a for a in agents if a.connection_state == "connected"]
    matching = [a.name for a in connected if agent_matches(a.meta_data, wanted)]
    if not matching:
        return AgentAvailability(
            NONE, f"no connected agent has {describe_tags(wanted)} ({len(connected)} connected agents checked)"
        )
    shown = ", ".join(matching[:5]) + (f" and {len(matching) - 5} more" if len(matching) > 5 else "")
    return AgentAvailability(FOUND, f"{len(matching)} connected agent(s) have {describe_tags(wanted)}: {shown}")
