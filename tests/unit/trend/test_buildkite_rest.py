"""The shared Buildkite REST client: where the token goes, and every bound."""

from __future__ import annotations

import hashlib

import pytest

from afd_e2e.buildkite.rest import BuildkiteRest, BuildkiteRestError

TOKEN = "bkua_very_secret"


def client(api, **options) -> BuildkiteRest:
    return BuildkiteRest(TOKEN, base_url=f"{api.url}/v2", what="the builds API", scopes="read_builds", **options)


def test_a_download_follows_the_redirect_to_storage_without_the_token(canned_server):
    api, storage = canned_server(), canned_server()
    body = b'{"schema": "afd-e2e/results/v1"}'
    signed = f"{storage.url}/bucket/results.json?sig=1"
    api.serve("/v2/artifacts/1/download", {"url": signed}, 302, {"Location": signed})
    storage.serve("/bucket/results.json?sig=1", body)
    got = client(api).download(
        f"{api.url}/v2/artifacts/1/download", max_bytes=1000, sha1=hashlib.sha1(body).hexdigest()
    )
    assert got == body
    assert api.requests == [("/v2/artifacts/1/download", f"Bearer {TOKEN}")]
    assert storage.requests == [("/bucket/results.json?sig=1", "")]


def test_a_download_is_checked_against_its_size_and_sha1(canned_server):
    api = canned_server()
    api.serve("/v2/a", b"0123456789")
    with pytest.raises(BuildkiteRestError, match="over the 5-byte bound"):
        client(api).download(f"{api.url}/v2/a", max_bytes=5)
    with pytest.raises(BuildkiteRestError, match="sha1sum does not match"):
        client(api).download(f"{api.url}/v2/a", max_bytes=100, sha1="0" * 40)


def test_a_next_page_on_another_origin_is_refused_and_never_asked(canned_server):
    api, elsewhere = canned_server(), canned_server()
    api.serve("/v2/builds", [{"number": 2}], headers={"Link": f'<{elsewhere.url}/v2/builds?page=2>; rel="next"'})
    pages = client(api).pages("builds")
    assert next(pages) == [{"number": 2}]
    with pytest.raises(BuildkiteRestError, match=r"pointed at another host \(127.0.0.1:\d+\): not followed"):
        next(pages)
    assert elsewhere.requests == []


def test_pages_on_the_api_origin_are_followed_within_the_bound(canned_server):
    api = canned_server()
    api.serve("/v2/builds", [{"n": 1}], headers={"Link": f'<{api.url}/v2/builds?page=2>; rel="next"'})
    api.serve("/v2/builds?page=2", [{"n": 2}], headers={"Link": f'<{api.url}/v2/builds>; rel="next"'})
    assert [item["n"] for page in client(api).pages("builds", max_pages=2) for item in page] == [1, 2]
    with pytest.raises(BuildkiteRestError, match="kept paginating past 3 pages"):
        list(client(api, max_pages=3).pages("builds"))


def test_rate_limits_are_retried_a_bounded_number_of_times(canned_server):
    api = canned_server()
    limited = (429, {"message": "slow down"}, {"RateLimit-Remaining": "0", "RateLimit-Reset": "0"})
    api.answers["/v2/x"] = [limited, (200, [{"ok": True}], {})]
    assert list(client(api).pages("x")) == [[{"ok": True}]]
    api.answers["/v2/y"] = [limited]
    with pytest.raises(BuildkiteRestError, match="kept answering HTTP 429"):
        list(client(api).pages("y"))
    assert len([path for path, _ in api.requests if path == "/v2/y"]) == 3


def test_errors_name_the_scope_and_never_the_token(canned_server):
    api = canned_server()
    api.serve("/v2/x", {"message": "no"}, 401)
    with pytest.raises(BuildkiteRestError) as caught:
        list(client(api).pages("x"))
    assert (
        str(caught.value)
        == "the builds API refused the token (HTTP 401); fix: use an API access token with the read_builds scope"
    )
    assert caught.value.status == 401
    assert TOKEN not in repr(client(api))


def test_a_slow_api_is_cut_off_at_the_timeout():
    import socket

    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        rest = BuildkiteRest(TOKEN, base_url=f"http://127.0.0.1:{silent.getsockname()[1]}/v2", timeout_s=0.3)
        with pytest.raises(BuildkiteRestError, match=r"did not answer within 0\.3 s"):  # it never answers
            list(rest.pages("x"))
