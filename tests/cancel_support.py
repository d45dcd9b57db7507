"""What the cancel tests share (tests/engine: a cancel in each phase of a real CPU vLLM case, spread over the
modules whose runs launch a server anyway): a run cancelled in ``phase`` is recorded as cancelled, never as an
engine failure, in results.json, the annotation and JUnit (``skipped``, no failure), and nothing is left running."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from afd_e2e.system.markers import find_marked


def junit_results(out: Path) -> dict[str, list[str]]:
    """Every testcase's result kind (failure, error, skipped, passed) by name, over all JUnit files."""
    kinds: dict[str, list[str]] = {"failure": [], "error": [], "skipped": [], "passed": []}
    for path in (out / "junit").glob("*.xml"):
        for case in ET.parse(path).getroot().iter("testcase"):
            kind = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
            kinds[kind].append(case.get("name", ""))
    return kinds


def assert_cancelled_everywhere(out: Path, case_id: str, phase: str) -> dict:
    """The run in ``out`` was cancelled during ``phase`` of ``case_id``: cancelled in results.json (the case too,
    unless the cancel came in its teardown, when all its work was done), no section failed, no hygiene check
    failed, nothing of the run left, the annotation says cancelled with no failing verdict, and JUnit has no
    failure (its unfinished parts skipped). Returns results.json."""
    saved = json.loads((out / "results.json").read_text())
    assert saved["status"] == "cancelled" and saved["verdict"]["status"] == "cancelled"
    case = saved["cases"][case_id]
    assert case["status"] == ("passed" if phase == "teardown" else "cancelled"), case["failure"]
    for section in ("smoke", "gsm8k", "performance", "capacity"):
        part = case.get(section) or {}
        assert part.get("status") not in ("failed", "crashed", "running"), (section, part.get("failure"))
    hygiene = {c["check"]: c for c in case["hygiene"]}
    assert all(c["status"] != "failed" for c in hygiene.values()), hygiene
    assert find_marked(json.loads((out / "run-record.json").read_text())["run_id"]) == []

    annotation = (out / "annotation.md").read_text(encoding="utf-8")
    assert "cancelled" in annotation.splitlines()[0]
    verdicts = annotation.split("### Model output")[0]  # the per-question GSM8K rows below may be ❌ (random weights)
    assert "❌" not in verdicts

    junit = junit_results(out)
    assert junit["failure"] == [] and junit["error"] == [], junit
    if phase != "teardown":
        assert junit["skipped"], junit
    return saved
