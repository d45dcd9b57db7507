"""The one Buildkite REST API client (agents for the pipeline generator, builds and artifacts for the trend).

What every caller gets: the token sent only to the API's own scheme, host and port (``Link`` pages elsewhere are
refused; an artifact download's redirect to the storage host is followed without the token); every request bounded
in time; pages and retries on ``429`` bounded in count; errors that say what went wrong and never show the token.
A ``requests.Session`` per thread, so one client can be shared by a thread pool.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests

API_URL = "https://api.buildkite.com/v2"
TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 3.05
MAX_PAGES = 50
RATE_LIMIT_RETRIES = 2
MAX_RATE_LIMIT_WAIT_S = 10.0


class BuildkiteRestError(Exception):
    """A request failed; the message says why (and how to fix it where known), never the token."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc.lower()


class BuildkiteRest:
    """GET JSON from ``base_url`` with ``Authorization: Bearer <token>``.

    ``what`` names the API in errors ("the agents API"); ``scopes`` names the token scopes a 401/403 asks for.
    """

    def __init__(
        self,
        token: str,
        *,
        base_url: str = API_URL,
        what: str = "the Buildkite API",
        scopes: str = "read_builds",
        timeout_s: float = TIMEOUT_S,
        max_pages: int = MAX_PAGES,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.what = what
        self.scopes = scopes
        self.timeout_s = timeout_s
        self.max_pages = max_pages
        self._token = token
        self._local = threading.local()

    def __repr__(self) -> str:  # never the token
        return f"BuildkiteRest({self.base_url!r}, what={self.what!r})"

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        return session

    def _same_origin(self, url: str) -> bool:
        return _origin(url) == _origin(self.base_url)

    def _request(self, url: str, *, authorized: bool, redirect_ok: bool = False) -> requests.Response:
        """One GET, redirects never followed here (requests would carry our header along)."""
        headers = {"Authorization": f"Bearer {self._token}"} if authorized else {}
        if authorized and not self._same_origin(url):
            raise BuildkiteRestError(f"{self.what} pointed at another host ({_origin(url)[1]}): not followed")
        timeout = (min(self.timeout_s, CONNECT_TIMEOUT_S), self.timeout_s)
        for attempt in range(RATE_LIMIT_RETRIES + 1):
            try:
                response = self._session().get(url, headers=headers, timeout=timeout, allow_redirects=False)
            except requests.Timeout:
                raise BuildkiteRestError(f"{self.what} did not answer within {self.timeout_s:g} s") from None
            except requests.RequestException as exc:
                raise BuildkiteRestError(f"cannot reach {self.what} ({type(exc).__name__})") from None
            if response.status_code != 429 or attempt == RATE_LIMIT_RETRIES:
                break
            time.sleep(_rate_limit_wait(response.headers))
        return self._checked(response, redirect_ok=redirect_ok)

    def _checked(self, response: requests.Response, *, redirect_ok: bool) -> requests.Response:
        status = response.status_code
        if redirect_ok and 300 <= status < 400:
            return response
        if status in (401, 403):
            raise BuildkiteRestError(
                f"{self.what} refused the token (HTTP {status}); fix: use an API access token with the "
                f"{self.scopes} scope",
                status,
            )
        if status == 429:
            raise BuildkiteRestError(f"{self.what} kept answering HTTP 429 (rate limited)", status)
        if not 200 <= status < 300:
            raise BuildkiteRestError(f"{self.what} answered HTTP {status}", status)
        return response

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def pages(self, path: str, *, noun: str = "items", max_pages: int | None = None) -> Iterator[list[Any]]:
        """Each page's JSON list of ``noun`` (objects), following ``Link: <...>; rel="next"`` on the API's own origin only."""
        url: str | None = self.url(path)
        limit = max_pages or self.max_pages
        for _ in range(limit):
            if url is None:
                return
            response = self._request(url, authorized=True)
            items = _json(response, self.what)
            if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
                raise BuildkiteRestError(f"{self.what} answered JSON that is not a list of {noun}")
            yield items
            url = response.links.get("next", {}).get("url")
        if url is not None and max_pages is None:
            raise BuildkiteRestError(f"{self.what} kept paginating past {limit} pages")

    def download(self, download_url: str, *, max_bytes: int, sha1: str | None = None) -> bytes:
        """An artifact's bytes: the API answers 302 to the storage host, fetched there without the token."""
        response = self._request(download_url, authorized=True, redirect_ok=True)
        if response.status_code in (301, 302, 303, 307, 308):
            location = response.headers.get("Location") or _redirect_from_body(response)
            if not location:
                raise BuildkiteRestError(f"{self.what} redirected an artifact download without a Location")
            target = urljoin(download_url, location)
            response = self._request(target, authorized=self._same_origin(target))
        body = response.content
        if len(body) > max_bytes:
            raise BuildkiteRestError(f"artifact is {len(body)} bytes, over the {max_bytes}-byte bound")
        if sha1 and hashlib.sha1(body).hexdigest() != sha1.lower():
            raise BuildkiteRestError("artifact's sha1sum does not match what the API listed")
        return body


def _rate_limit_wait(headers: Mapping[str, str]) -> float:
    try:
        reset = float(headers.get("RateLimit-Reset", "1"))
    except ValueError:
        reset = 1.0
    return min(max(reset, 0.1), MAX_RATE_LIMIT_WAIT_S)


def _redirect_from_body(response: requests.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("url") if isinstance(body, dict) else None


def _json(response: requests.Response, what: str) -> Any:
    try:
        return response.json()
    except ValueError:
        raise BuildkiteRestError(f"{what} answered something that is not JSON") from None
