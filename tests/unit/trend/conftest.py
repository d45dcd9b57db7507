"""Canned-answer HTTP servers on loopback (two of them are two origins) for the REST client's tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Canned:
    url: str = ""
    answers: dict[str, list[tuple[int, Any, dict[str, str]]]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)  # (path, Authorization)

    def serve(self, path: str, body: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        """Answer GET ``path``; several answers for one path are given in turn (the last one repeats)."""
        self.answers.setdefault(path, []).append((status, body, headers or {}))


@pytest.fixture
def canned_server() -> Iterator[Callable[[], Canned]]:
    servers: list[ThreadingHTTPServer] = []

    def start() -> Canned:
        state = Canned()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                state.requests.append((self.path, self.headers.get("Authorization", "")))
                queue = state.answers.get(self.path) or [(404, {"message": "Not Found"}, {})]
                status, body, headers = queue.pop(0) if len(queue) > 1 else queue[0]
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        servers.append(server)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        state.url = f"http://127.0.0.1:{server.server_address[1]}"
        return state

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
