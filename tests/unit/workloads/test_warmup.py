"""Unit tier: the ``warmup`` phase (``afd_e2e/phases/warmup.py``), added as one module and one line of
``phases/builtin.py``: its profile keys, its timing (an injected clock), its failure for a real cause (an HTTP server
that answers 503, through the real completion client), its results section in results.json and the schema, and the
JUnit testcase it gets with no renderer of its own. The engine proof is in tests/engine/test_registered_phase_cpu_vllm.py.
"""

from __future__ import annotations

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from afd_e2e.errors import UsageError
from afd_e2e.phases import warmup
from afd_e2e.phases.smoke import smoke_spec
from afd_e2e.phases.warmup import WarmupResult, WarmupSpec, spec_of, warm_up
from afd_e2e.profile import catalogue, load_profile, parse_profile
from afd_e2e.report.junit import build_testcases
from afd_e2e.results.codec import to_json
from afd_e2e.results.schema import schema_text
from afd_e2e.results.status import Status
from afd_e2e.results.store import results_from_json
from afd_e2e.workloads.completions import CompletionError, complete
from repo_paths import REPO
from unit.timing import GUARD_S

TINY = (REPO / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text()


def tiny_with(warmup_section: dict | None) -> dict:
    document = yaml.safe_load(TINY)
    first = document["cases"][next(iter(document["cases"]))]
    first["phases"] = ["smoke", "warmup", *first["phases"][1:]]
    if warmup_section is not None:
        document["workloads"]["warmup"] = warmup_section
    return document


def test_it_is_a_built_in_phase_after_smoke_with_its_budget():
    assert catalogue.phase_names()[:2] == ("smoke", "warmup")
    assert catalogue.phase("warmup").budget.key == "warmup_s"
    assert load_profile("tiny-cpu").budgets.warmup_s == 300


def test_its_profile_keys_and_their_defaults():
    profile = parse_profile(tiny_with({"requests": 2, "max_tokens": 3}), "x.yaml")
    assert profile.cases[0].phases[:2] == ("smoke", "warmup")
    assert spec_of(profile) == WarmupSpec(2, smoke_spec(profile).prompt, 3)
    # without workloads.warmup: four requests of the smoke's prompt and length
    bare = parse_profile(tiny_with(None), "x.yaml")
    smoke = smoke_spec(bare)
    assert spec_of(bare) == WarmupSpec(4, smoke.prompt, smoke.max_tokens)


@pytest.mark.parametrize(
    ("section", "error"),
    [
        ({"requests": 0}, r"workloads\.warmup\.requests"),
        ({"request": 3}, r"workloads\.warmup\.request: unknown key.*closest known key is requests"),
    ],
)
def test_a_bad_key_is_one_line_naming_it(section, error):
    with pytest.raises(UsageError, match=error):
        parse_profile(tiny_with(section), "x.yaml")


def test_each_latency_is_recorded_first_to_last():
    ticks = itertools.count()
    readings = iter([0.0, 0.9, 1.0, 1.2, 2.0, 2.1])  # a cold first request, then warm ones
    result = warm_up(WarmupSpec(3, "p", 4), lambda: next(ticks), stopped=lambda: False, clock=lambda: next(readings))
    assert result == WarmupResult(Status.PASSED, None, [0.9, 0.2, 0.1], first_s=0.9, last_s=0.1)


def test_a_stop_asked_for_ends_it_cancelled():
    asked = iter([False, True])
    result = warm_up(WarmupSpec(3, "p", 4), lambda: None, stopped=lambda: next(asked), clock=lambda: 0.0)
    assert result.status is Status.CANCELLED and result.failure == "stopped after 1 of 3 requests"
    assert result.latencies_s == [0.0]


class _Unavailable(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.send_response(503)
        self.end_headers()
        self.wfile.write(b"engine is warming up")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def unavailable_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Unavailable)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_request_that_gets_no_completion_fails_the_phase_naming_it(unavailable_server):
    def send() -> object:
        return complete(unavailable_server, "tiny-moe", "p", max_tokens=2, timeout_s=GUARD_S)  # a guard: it answers

    result = warm_up(WarmupSpec(3, "p", 2), send, stopped=lambda: False)
    assert result.status is Status.FAILED and result.latencies_s == []
    assert result.failure.startswith("request 1 of 3: POST ") and "HTTP 503: engine is warming up" in result.failure
    with pytest.raises(CompletionError):
        send()


@pytest.fixture
def results_document():
    return json.loads((REPO / "tests/fixtures/results/tiny-cpu/results.json").read_text())


def test_its_section_is_in_results_json_the_schema_and_junit(results_document):
    case_id = next(iter(results_document["cases"]))
    failed = WarmupResult(Status.FAILED, "request 2 of 4: POST /v1/completions: HTTP 503", [1.5], 1.5, 1.5)
    results_document["cases"][case_id]["warmup"] = to_json(failed)
    results = results_from_json(results_document)
    assert results.cases[case_id].section("warmup") == failed
    assert '"WarmupResult"' in schema_text()
    (testcase,) = [t for t in build_testcases(results) if t.name == warmup.NAME]
    assert (testcase.outcome, testcase.message) == ("failure", failed.failure)
