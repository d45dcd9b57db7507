"""The results contract: the shipped JSON Schema is the model's, fixtures fit it, and a malformed results.json is a
one-line error (exit 2) from ``afd-e2e report``, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import jsonschema
import pytest

from afd_e2e.cli import main
from afd_e2e.results.codec import from_json, to_json
from afd_e2e.results.model import LOG_TAIL_CHARS, RunResults
from afd_e2e.results.schema import SCHEMA_FILE, schema_text
from junit_xsd import assert_valid_junit
from repo_paths import FIXTURES, SHARED
from results_docs import RESULTS_FIXTURES, load_fixture

FIXTURE_NAMES = sorted(path.parent.name for path in RESULTS_FIXTURES.glob("*/results.json"))


def test_the_shipped_schema_is_the_one_the_model_generates(capsys):
    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text()
    assert main(["schema", "results"]) == 0
    assert capsys.readouterr().out == schema_text()
    jsonschema.Draft202012Validator.check_schema(json.loads(schema_text()))


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_every_fixture_fits_the_shipped_schema_and_round_trips(name):
    data = load_fixture(name)
    jsonschema.validate(data, json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    results = from_json(RunResults, data)
    assert from_json(RunResults, to_json(results)) == results


def test_the_seed_fixture_is_what_its_script_makes_now():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "AFD_E2E_SHARED": str(SHARED)}
    script = FIXTURES / "make_seed_results.py"
    assert subprocess.run([sys.executable, str(script), "--check"], env=env, check=False).returncode == 0


def _seed() -> dict:
    return load_fixture("seed")


def _with(path: list, value) -> dict:
    data = _seed()
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


def _without(path: list) -> dict:
    data = _seed()
    target = data
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return data


SEED_TEXT = (RESULTS_FIXTURES / "seed" / "results.json").read_text(encoding="utf-8")
MALFORMED = {
    "empty": ("", "is empty"),
    "truncated": (SEED_TEXT[: len(SEED_TEXT) // 2], "is not valid JSON"),
    "not an object": ("[1, 2]", "the top level is list, not an object"),
    "wrong schema": (json.dumps(_with(["schema"], "afd-e2e/results/v1")), "has schema 'afd-e2e/results/v1'"),
    "no schema": (json.dumps(_without(["schema"])), "has schema None"),
    "case is a string": (
        json.dumps(_with(["cases", "baseline-eager"], "oops")),
        "at cases.baseline-eager: expected an object",
    ),
    "missing key": (
        json.dumps(_without(["cases", "afd-eager-4a4f", "label"])),
        "at cases.afd-eager-4a4f.label: missing field",
    ),
    "unknown status": (
        json.dumps(_with(["verdict", "status"], "pass")),
        "at verdict.status: expected one of running|passed",
    ),
    "wrong type": (
        json.dumps(_with(["cases", "afd-eager-4a4f", "timings", "launch_to_ready_s"], "655.8")),
        "at cases.afd-eager-4a4f.timings.launch_to_ready_s: expected a number, got a string",
    ),
    "NaN where a number is due": (
        json.dumps(_with(["comparisons", "performance", "performance", "metrics", 0, "delta_pct"], float("nan"))),
        "at comparisons.performance.performance.metrics[0].delta_pct: expected a finite number, got nan",
    ),
    "misspelt key": (
        json.dumps(_with(["cases", "afd-eager-4a4f", "gsm8"], None)),
        "at cases.afd-eager-4a4f.gsm8: unknown field",
    ),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_results_file_is_a_one_line_error(name, tmp_path, capsys):
    text, expected = MALFORMED[name]
    (tmp_path / "results.json").write_text(text, encoding="utf-8")

    assert main(["report", str(tmp_path)]) == 2

    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("afd-e2e report: error: "), err
    assert expected in err, err
    assert "Traceback" not in err


def test_a_50_mib_log_tail_renders_with_a_note_of_what_was_cut(tmp_path, capsys):
    out = tmp_path / "seed"
    shutil.copytree(RESULTS_FIXTURES / "seed", out)
    data = _seed()
    data["cases"]["afd-eager-4a4f"].update(status="failed", failure="engine died", log_tail="x" * (50 * 2**20))
    (out / "results.json").write_text(json.dumps(data), encoding="utf-8")

    assert main(["report", str(out)]) == 0

    annotation = (out / "annotation.md").read_text(encoding="utf-8")
    assert len(annotation.encode("utf-8")) <= 1024 * 1024
    note = "characters cut; the whole text is in logs/afd-eager-4a4f/ffn.log, logs/afd-eager-4a4f/attention.log]"
    assert f"<pre>[{50 * 2**20 - LOG_TAIL_CHARS:,} {note}" in annotation
    junit = (out / "junit" / "qwen3.5-122b-a10b-1.xml").read_text(encoding="utf-8")
    assert note in junit and len(junit) < 2**20


def test_the_real_tiny_cpu_run_carries_its_preflight_and_shows_it(tmp_path):
    data = load_fixture("tiny-cpu")
    jsonschema.validate(data, json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    preflight = data["preflight"]
    checks = {check["name"]: check for check in preflight["checks"]}
    # how long preflight took is a figure of speed: benchmarks/preflight.py measures it; here only that it is recorded
    assert preflight["status"] == "passed" and isinstance(preflight["seconds"], float) and preflight["seconds"] >= 0
    assert checks["gpu count"] == {
        "name": "gpu count",
        "status": "skipped",
        "measured": "profile tiny-cpu runs on the CPU",
        "wanted": "",
        "fix": "",
    }
    assert checks["ports"]["status"] == checks["checkpoint config"]["status"] == checks["vllm"]["status"] == "passed"
    assert preflight["software"]["vllm"].endswith("+cpu")
    out = tmp_path / "tiny-cpu"
    shutil.copytree(RESULTS_FIXTURES / "tiny-cpu", out)

    assert main(["report", str(out)]) == 0

    annotation = (out / "annotation.md").read_text(encoding="utf-8")
    assert "**Preflight** ✅ passed: ⏭️ 11 skipped · ✅ 10 passed" in annotation
    assert "| gpu count | ⏭️ skipped | profile tiny\\-cpu runs on the CPU |  |  |" in annotation
    suite = next(
        s for s in assert_valid_junit(out / "junit" / "tiny-cpu-1.xml") if s.get("name").endswith(".preflight")
    )
    assert (suite.get("tests"), suite.get("skipped"), suite.get("failures")) == ("21", "11", "0")


@pytest.mark.parametrize("name", ["case is a string", "missing key", "unknown status", "wrong type", "misspelt key"])
def test_the_shipped_schema_rejects_what_the_reader_rejects(name):
    text, _ = MALFORMED[name]
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    assert list(validator.iter_errors(json.loads(text)))
