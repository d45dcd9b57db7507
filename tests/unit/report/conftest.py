"""Fixtures for the report tests: results documents to render, a recording buildkite-agent, a local HTTP server."""

from __future__ import annotations

import copy
import http.server
import json
import os
import shutil
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from afd_e2e.report import ReportPaths, render_all
from results_docs import RESULTS_FIXTURES as FIXTURES
from results_docs import load_fixture
from unit.timing import GUARD_S

PORT_RANGE = range(20400, 20500)  # this suite's share of the project's test ports


@pytest.fixture
def seed_results() -> dict:
    """The seed PR's run: Qwen3.5-122B native vs AFD 4A4F, five repetitions each side."""
    return copy.deepcopy(load_fixture("seed"))


@pytest.fixture
def tiny_results() -> dict:
    """A tiny-cpu SMOKE run (TP1 vs TP2 on vLLM's CPU backend) with random-model output."""
    return copy.deepcopy(load_fixture("tiny-cpu"))


@pytest.fixture
def crashed_results() -> dict:
    """A real tiny-cpu run that crashed between phases (harness error after smoke), as the runner wrote it."""
    return copy.deepcopy(load_fixture("tiny-cpu-crashed"))


@pytest.fixture
def results_dir(tmp_path: Path) -> Callable[[dict], Path]:
    """Write a results document into a fresh folder, as `afd-e2e run` leaves it."""

    def write(results: dict) -> Path:
        out = tmp_path / "out"
        out.mkdir(exist_ok=True)
        (out / "results.json").write_text(json.dumps(results), encoding="utf-8")
        return out

    return write


@pytest.fixture
def seed_dir(tmp_path: Path) -> Path:
    out = tmp_path / "seed"
    shutil.copytree(FIXTURES / "seed", out)
    return out


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> ReportPaths:
    """The seed run rendered once per module, with one process log, for tests that only read the folder."""
    out = tmp_path_factory.mktemp("rendered") / "seed"
    shutil.copytree(FIXTURES / "seed", out)
    (out / "logs" / "baseline-eager").mkdir(parents=True)
    (out / "logs" / "baseline-eager" / "server.log").write_text("INFO\n")
    return render_all(out)


_AGENT_STUB = """#!{python}
import json, os, sys
body = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
with open({log!r}, "a", encoding="utf-8") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(), "stdin": body}}) + "\\n")
sys.exit(int(os.environ.get("AGENT_STUB_EXIT", "0")))
"""


class AgentStub:
    """A `buildkite-agent` on PATH that records each call's arguments, working folder and stdin."""

    def __init__(self, folder: Path) -> None:
        self.log = folder / "calls.jsonl"
        script = folder / "buildkite-agent"
        script.write_text(_AGENT_STUB.format(python=sys.executable, log=str(self.log)), encoding="utf-8")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)

    @property
    def calls(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def agent_stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentStub:
    folder = tmp_path / "bin"
    folder.mkdir()
    stub = AgentStub(folder)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return stub


class RecordingServer:
    """A local HTTP server on 127.0.0.1 that records POSTs and answers as told: its status, and, while ``held``,
    only once the test releases it (``release()``, also on close): a server slower than any client budget.
    ``on_post`` (optional) runs as each POST arrives, before the answer: e.g. it moves a test's clock, as an upload
    that took that long would."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.status = 202
        self.held = False
        self.on_post: Callable[[], object] | None = None
        self.released = threading.Event()
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                recorder.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if recorder.on_post is not None:
                    recorder.on_post()
                if recorder.held:
                    recorder.released.wait(GUARD_S)
                payload = b'{"id": "upload-1"}'
                try:
                    self.send_response(recorder.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up waiting, as a slow-server test intends

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = _bind_in_range(Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/uploads"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.release()
        self.httpd.shutdown()
        self.httpd.server_close()


def _bind_in_range(handler: type) -> http.server.ThreadingHTTPServer:
    for port in PORT_RANGE:
        try:
            server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
        except OSError:
            continue
        server.daemon_threads = True
        return server
    raise RuntimeError(f"no free port in {PORT_RANGE.start}-{PORT_RANGE.stop - 1}")


@pytest.fixture
def upload_server() -> Iterator[RecordingServer]:
    server = RecordingServer()
    yield server
    server.close()
