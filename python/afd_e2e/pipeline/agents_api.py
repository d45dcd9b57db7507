"""Buildkite agents REST API client: which agents are connected, with their tags (the side-effect edge of the check).

``GET {api}/organizations/{org}/agents?per_page=100`` with ``Authorization: Bearer <token>`` (scope
``read_agents``), following the ``Link: <...>; rel="next"`` header on the API's own host only, through the shared
client ``buildkite.rest``. Short timeouts: the generator must answer quickly, and any failure becomes an ``unknown`` availability that the decision treats safely.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from afd_e2e.buildkite.env import AGENTS_API_TOKEN, ORGANIZATION_SLUG, organization_slug
from afd_e2e.buildkite.rest import API_URL, BuildkiteRest, BuildkiteRestError
from afd_e2e.pipeline.agents import UNKNOWN, Agent, AgentAvailability, AgentsLookup, availability

TOKEN_ENV = AGENTS_API_TOKEN
TIMEOUT_S = 10.0
MAX_PAGES = 50  # 5000 agents: a bound against a Link loop


class AgentsApiError(Exception):
    """The agents could not be listed; the message says why and how to fix it, never the token."""


def list_agents(organization: str, token: str, *, base_url: str = API_URL, timeout_s: float = TIMEOUT_S) -> list[Agent]:
    """Every agent the API lists for ``organization``, across all pages (on the API's own host only)."""
    rest = BuildkiteRest(
        token, base_url=base_url, what="the agents API", scopes="read_agents", timeout_s=timeout_s, max_pages=MAX_PAGES
    )
    try:
        return [
            _agent(item)
            for page in rest.pages(f"organizations/{organization}/agents?per_page=100", noun="agents")
            for item in page
        ]
    except BuildkiteRestError as exc:
        if exc.status == 404:
            raise AgentsApiError(
                f"organization {organization!r} not found (HTTP 404); fix: check {ORGANIZATION_SLUG}"
            ) from None
        raise AgentsApiError(str(exc)) from None


def _agent(item: Mapping[str, object]) -> Agent:
    return Agent(
        name=str(item.get("name", "")),
        connection_state=str(item.get("connection_state", "")),
        meta_data=tuple(str(tag) for tag in item.get("meta_data") or ()),  # type: ignore[union-attr]
    )


def agents_lookup(
    environ: Mapping[str, str],
    *,
    token_env: str = TOKEN_ENV,
    base_url: str = API_URL,
    timeout_s: float = TIMEOUT_S,
) -> AgentsLookup:
    """A lookup for ``decide``: lists the agents once (on first use), then matches each profile's tags."""
    token = environ.get(token_env, "")
    organization = organization_slug(environ)

    @functools.cache
    def listed() -> tuple[Agent, ...] | AgentsApiError:
        """The organization's agents, or why they could not be listed (asked once for all profiles)."""
        try:
            if not token:
                raise AgentsApiError(
                    f"{token_env} is not set; fix: give it a Buildkite API access token with the read_agents scope"
                )
            if not organization:
                raise AgentsApiError(f"{ORGANIZATION_SLUG} is not set (Buildkite sets it inside a build)")
            return tuple(list_agents(organization, token, base_url=base_url, timeout_s=timeout_s))
        except AgentsApiError as exc:
            return exc

    def lookup(wanted: Mapping[str, str]) -> AgentAvailability:
        agents = listed()
        if isinstance(agents, AgentsApiError):
            return AgentAvailability(UNKNOWN, f"could not check for a matching agent: {agents}")
        return availability(agents, wanted)

    return lookup
