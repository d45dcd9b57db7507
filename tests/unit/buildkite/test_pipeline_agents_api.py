"""The agents REST API client against a local server answering the documented shapes."""

from __future__ import annotations

import threading

import pytest
from bk_support import AGENTS_LIST as LIST
from bk_support import agent

from afd_e2e.pipeline.agents import FOUND, NONE, UNKNOWN
from afd_e2e.pipeline.agents_api import AgentsApiError, agents_lookup, list_agents

TOKEN = "bkua_secret_token_value"
WANTED = {"queue": "large-model", "gpus": "8"}


def lookup_env(**extra: str) -> dict[str, str]:
    return {"BUILDKITE_ORGANIZATION_SLUG": "acme", "BUILDKITE_AGENTS_API_TOKEN": TOKEN, **extra}


def test_pages_are_followed_through_the_link_header(agents_api):
    page2 = "/organizations/acme/agents?page=2&per_page=100"
    page3 = "/organizations/acme/agents?page=3&per_page=100"
    base = agents_api.base_url
    agents_api.serve(
        LIST,
        [agent("cpu-1", "queue=default")],
        headers={"Link": f'<{base}{page2}>; rel="next", <{base}{page3}>; rel="last"'},
    )
    agents_api.serve(
        page2,
        [agent("gpu-1", "queue=large-model", "gpus=8")],
        headers={"Link": f'<{base}{LIST}>; rel="first", <{base}{page3}>; rel="next"'},
    )
    agents_api.serve(page3, [agent("gpu-2", "queue=large-model", "gpus=8", state="lost")])

    agents = list_agents("acme", TOKEN, base_url=base)

    assert [a.name for a in agents] == ["cpu-1", "gpu-1", "gpu-2"]
    assert agents[1].meta_data == ("queue=large-model", "gpus=8")
    assert agents[2].connection_state == "lost"
    assert [path for path, _ in agents_api.requests] == [f"/v2{p}" for p in (LIST, page2, page3)]
    assert {auth for _, auth in agents_api.requests} == {f"Bearer {TOKEN}"}


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (401, "refused the token (HTTP 401); fix: use an API access token with the read_agents scope"),
        (403, "refused the token (HTTP 403)"),
        (404, "organization 'acme' not found (HTTP 404); fix: check BUILDKITE_ORGANIZATION_SLUG"),
        (500, "the agents API answered HTTP 500"),
    ],
)
def test_http_errors_say_why_without_the_token(agents_api, status, message):
    agents_api.serve(LIST, {"message": "nope"}, status=status)
    with pytest.raises(AgentsApiError) as caught:
        list_agents("acme", TOKEN, base_url=agents_api.base_url)
    assert message in str(caught.value)
    assert TOKEN not in str(caught.value)


def test_a_slow_answer_times_out_quickly(agents_api):
    answer = threading.Event()  # the server answers only once the client has given up
    agents_api.serve(LIST, [agent("gpu-1", "queue=large-model", "gpus=8")], held=answer)
    try:
        with pytest.raises(AgentsApiError, match=r"did not answer within 0.3 s"):  # not the answer given later
            list_agents("acme", TOKEN, base_url=agents_api.base_url, timeout_s=0.3)
    finally:
        answer.set()


@pytest.mark.parametrize(
    ("body", "message"),
    [(b"<html>proxy error</html>", "not JSON"), ({"agents": []}, "not a list of agents")],
)
def test_unexpected_bodies_are_errors(agents_api, body, message):
    agents_api.serve(LIST, body)
    with pytest.raises(AgentsApiError, match=message):
        list_agents("acme", TOKEN, base_url=agents_api.base_url)


def test_an_unreachable_api_is_an_error():
    with pytest.raises(AgentsApiError, match=r"cannot reach the agents API \(ConnectionError\)"):
        list_agents("acme", TOKEN, base_url="http://127.0.0.1:9/v2", timeout_s=1)


def test_lookup_lists_once_for_several_profiles(agents_api):
    agents_api.serve(LIST, [agent("gpu-1", "queue=large-model", "gpus=8"), agent("gpu4-1", "queue=gpu-4", "gpus=4")])
    lookup = agents_lookup(lookup_env(), base_url=agents_api.base_url)
    assert lookup(WANTED).status == FOUND
    assert lookup({"queue": "gpu-4", "gpus": "4"}).detail.endswith(": gpu4-1")
    assert lookup({"queue": "gpu-2"}).status == NONE
    assert len(agents_api.requests) == 1


def test_lookup_reads_the_token_from_the_configured_variable(agents_api):
    agents_api.serve(LIST, [agent("gpu-1", "queue=large-model", "gpus=8")])
    lookup = agents_lookup(
        {"BUILDKITE_ORGANIZATION_SLUG": "acme", "MY_TOKEN": "other"}, token_env="MY_TOKEN", base_url=agents_api.base_url
    )
    assert lookup(WANTED).status == FOUND
    assert agents_api.requests[0][1] == "Bearer other"


@pytest.mark.parametrize(
    ("environ", "reason"),
    [
        (
            {"BUILDKITE_ORGANIZATION_SLUG": "acme"},
            "BUILDKITE_AGENTS_API_TOKEN is not set; fix: give it a Buildkite API",
        ),
        ({"BUILDKITE_AGENTS_API_TOKEN": TOKEN}, "BUILDKITE_ORGANIZATION_SLUG is not set"),
    ],
)
def test_lookup_without_configuration_is_unknown_and_asks_nothing(agents_api, environ, reason):
    found = agents_lookup(environ, base_url=agents_api.base_url)(WANTED)
    assert found.status == UNKNOWN
    assert found.detail.startswith("could not check for a matching agent: ")
    assert reason in found.detail
    assert agents_api.requests == []


def test_lookup_turns_a_refused_token_into_unknown(agents_api):
    agents_api.serve(LIST, {"message": "Authentication required"}, status=401)
    found = agents_lookup(lookup_env(), base_url=agents_api.base_url)(WANTED)
    assert found.status == UNKNOWN
    assert "HTTP 401" in found.detail
    assert TOKEN not in found.detail


def test_a_next_page_on_another_host_is_not_followed_and_gets_no_token(agents_api):
    """``localhost`` reaches the same server, so a followed link would show up in the recorded requests."""
    elsewhere = agents_api.base_url.replace("127.0.0.1", "localhost") + "/organizations/acme/agents?page=2"
    agents_api.serve(LIST, [agent("cpu-1", "queue=default")], headers={"Link": f'<{elsewhere}>; rel="next"'})
    with pytest.raises(AgentsApiError, match=r"pointed at another host \(localhost:\d+\): not followed"):
        list_agents("acme", TOKEN, base_url=agents_api.base_url)
    assert [path for path, _ in agents_api.requests] == [f"/v2{LIST}"]
