"""Fixtures for the Buildkite tests: Buildkite's official pipeline schema and a local agents API server."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jsonschema
import pytest

from afd_e2e.cli import main
from repo_paths import SHARED
from unit.timing import GUARD_S

PORTS = range(21000, 21500)  # this suite's port range


@pytest.fixture(scope="session")
def valid_pipeline() -> Callable[[dict[str, Any]], None]:
    """Asserts that a pipeline validates against Buildkite's official schema, listing every error."""
    path = SHARED / "buildkite" / "pipeline-schema.json"
    if not path.is_file():
        pytest.fail(f"{path} is missing: tests need the project's shared/ folder beside the checkout")
    validator = jsonschema.Draft7Validator(json.loads(path.read_text(encoding="utf-8")))

    def check(pipeline: dict[str, Any]) -> None:
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(pipeline)]
        assert not errors, "pipeline does not validate against Buildkite's schema:\n" + "\n".join(errors)

    return check


@dataclass
class Page:
    """One canned answer: status, JSON body, extra headers; with ``held``, given only once the test sets that event
    (a server slower than the client's timeout, however slow the machine)."""

    status: int = 200
    body: Any = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    held: threading.Event | None = None


@dataclass
class AgentsApiServer:
    base_url: str
    pages: dict[str, Page]  # by request path including the query string
    requests: list[tuple[str, str]]  # (path, Authorization header)

    def serve(self, path: str, body: Any, **page: Any) -> None:
        """Answer GET ``/v2{path}`` with ``body`` (JSON unless bytes) and the given status/headers/held."""
        self.pages[f"/v2{path}"] = Page(body=body, **page)


def _free_port() -> int:
    for port in PORTS:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.fail(f"no free port in {PORTS.start}-{PORTS.stop - 1}")


@pytest.fixture
def agents_api() -> Iterator[AgentsApiServer]:
    """A local HTTP server answering the agents API's paths with the pages the test sets."""
    server_state = AgentsApiServer("", {}, [])

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            server_state.requests.append((self.path, self.headers.get("Authorization", "")))
            page = server_state.pages.get(self.path, Page(404, {"message": "Not Found"}))
            if page.held is not None:
                page.held.wait(GUARD_S)
            body = page.body if isinstance(page.body, bytes) else json.dumps(page.body).encode()
            try:
                self.send_response(page.status)
                for name, value in {"Content-Type": "application/json", **page.headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (the timeout test)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", _free_port()), Handler)
    httpd.daemon_threads = True
    server_state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v2"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server_state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
def pipeline_cli(monkeypatch, capsys, agents_api) -> Callable[..., tuple[int, str, str]]:
    """Runs ``afd-e2e pipeline ARGS`` against the local agents API under exactly ``variables`` (no other Buildkite or
    AFD variable from the environment); returns its exit code, stdout and stderr."""

    def run(variables: dict[str, str], *args: str) -> tuple[int, str, str]:
        for name in list(os.environ):
            if name.startswith(("BUILDKITE", "AFD_")):
                monkeypatch.delenv(name)
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        code = main(["pipeline", "--agents-api-url", agents_api.base_url, *args])
        out, err = capsys.readouterr()
        return code, out, err

    return run
