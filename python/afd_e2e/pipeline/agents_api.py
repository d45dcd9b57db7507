"""Buildkite agents REST API client: which agents are connected, with their tags (the side-effect edge of the check).

``GET {api}/organizations/{org}/agents?per_page=100`` with ``Authorization: Bearer <token>`` (scope
``read_agents``), following the ``Link: <...>; rel="next"`` header. Short timeouts: the generator must answer
quickly, and any failure becomes an ``unknown`` availability that the decision treats safely.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import requests

from afd_e2e.pipeline.agents import UNKNOWN, Agent, AgentAvailability, AgentsLookup, availability

API_URL = "https://api.buildkite.com/v2"
TOKEN_ENV = "BUILDKITE_AGENTS_API_TOKEN"
ORGANIZATION_ENV = "BUILDKITE_ORGANIZATION_SLUG"
TIMEOUT_S = 10.0
MAX_PAGES = 50  # 5000 agents: a bound against a Link loop


class AgentsApiError(Exception):
    """The agents could not be listed; the message says why and how to fix it, never the token."""


def list_agents(organization: str, token: str, *, base_url: str = API_URL, timeout_s: float = TIMEOUT_S) -> list[Agent]:
    """Every agent the API lists for ``organization``, across all pages."""
    url: str | None = f"{base_url.rstrip('/')}/organizations/{organization}/agents?per_page=100"
    agents: list[Agent] = []
    with requests.Session() as session:
        session.headers["Authorization"] = f"Bearer {token}"
        for _ in range(MAX_PAGES):
            if url is None:
                return agents
            response = _get(session, url, timeout_s, organization)
            agents.extend(_parse_page(response))
            url = response.links.get("next", {}).get("url")
    raise AgentsApiError(f"the agents API kept paginating past {MAX_PAGES} pages")


def _get(session: requests.Session, url: str, timeout_s: float, organization: str) -> requests.Response:
    try:
        response = session.get(url, timeout=(min(timeout_s, 3.05), timeout_s))
    except requests.Timeout:
        raise AgentsApiError(f"the agents API did not answer within {timeout_s:g} s") from None
    except requests.RequestException as exc:
        raise AgentsApiError(f"cannot reach the agents API ({type(exc).__name__})") from None
    if response.status_code in (401, 403):
        raise AgentsApiError(
            f"the agents API refused the token (HTTP {response.status_code}); "
            "fix: use an API access token with the read_agents scope"
        )
    if response.status_code == 404:
        raise AgentsApiError(f"organization {organization!r} not found (HTTP 404); fix: check {ORGANIZATION_ENV}")
    if response.status_code != 200:
        raise AgentsApiError(f"the agents API answered HTTP {response.status_code}")
    return response


def _parse_page(response: requests.Response) -> list[Agent]:
    try:
        items = response.json()
    except ValueError:
        raise AgentsApiError("the agents API answered something that is not JSON") from None
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise AgentsApiError("the agents API answered JSON that is not a list of agents")
    return [
        Agent(
            name=str(item.get("name", "")),
            connection_state=str(item.get("connection_state", "")),
            meta_data=tuple(str(tag) for tag in item.get("meta_data") or ()),
        )
        for item in items
    ]


def agents_lookup(
    environ: Mapping[str, str],
    *,
    token_env: str = TOKEN_ENV,
    base_url: str = API_URL,
    timeout_s: float = TIMEOUT_S,
) -> AgentsLookup:
    """A lookup for ``decide``: lists the agents once (on first use), then matches each profile's tags."""
    token = environ.get(token_env, "")
    organization = environ.get(ORGANIZATION_ENV, "")

    @functools.cache
    def listed() -> tuple[Agent, ...] | AgentsApiError:
        """The organization's agents, or why they could not be listed (asked once for all profiles)."""
        try:
            if not token:
                raise AgentsApiError(
                    f"{token_env} is not set; fix: give it a Buildkite API access token with the read_agents scope"
                )
            if not organization:
                raise AgentsApiError(f"{ORGANIZATION_ENV} is not set (Buildkite sets it inside a build)")
            return tuple(list_agents(organization, token, base_url=base_url, timeout_s=timeout_s))
        except AgentsApiError as exc:
            return exc

    def lookup(wanted: Mapping[str, str]) -> AgentAvailability:
        agents = listed()
        if isinstance(agents, AgentsApiError):
            return AgentAvailability(UNKNOWN, f"could not check for a matching agent: {agents}")
        return availability(agents, wanted)

    return lookup
