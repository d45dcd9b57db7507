"""Unit tier: the commands a pipeline-upload step or a person at a terminal runs to read profiles (pipeline, plan,
gates, profiles, preflight), and a follower job's ``join`` without ``--follow``, import no renderer, numpy or
matplotlib, so they start fast and need no plotting stack.

Each runs in a fresh interpreter (``sys.modules`` of this test process has everything loaded), and reports the
modules it ended with. The layers make it hold: the built-in phases' renderers are installed only by the commands
that render (``afd_e2e.phases.rendering``); ``cli`` imports only the named command's module."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from repo_paths import FIXTURES, REPO, SHARED

PROBE = """
import json, sys
from afd_e2e.cli import main
try:
    code = main(sys.argv[2:])
except SystemExit as exc:  # --help
    code = exc.code
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("numpy", "matplotlib") or m.startswith("afd_e2e.report"))
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "heavy": heavy}, out)
"""

CHEAP = {
    "pipeline": ["pipeline", "--profile", "tiny-cpu"],
    "pipeline --help": ["pipeline", "--help"],
    "plan": ["plan", "--profile", "tiny-cpu"],
    "gates": ["gates", "--profile", "tiny-cpu"],
    "profiles": ["profiles"],
    "preflight": [
        "preflight",
        *("--profile", str(FIXTURES / "profiles" / "h200x2-nvlink.yaml")),
        *("--readings", str(SHARED / "fixtures" / "gpu" / "h200x2" / "pynvml.json"), "--json"),
    ],
}


def imported(tmp_path, argv: list[str]) -> dict:
    found = tmp_path / "modules.json"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{REPO / 'python'}"}
    subprocess.run(
        [sys.executable, "-c", PROBE, str(found), *argv], env=env, capture_output=True, timeout=120, check=False
    )
    return json.loads(found.read_text())


@pytest.mark.parametrize("command", CHEAP)
def test_a_cheap_command_imports_no_renderer_numpy_or_matplotlib(tmp_path, command):
    report = imported(tmp_path, CHEAP[command])
    assert report["heavy"] == [], f"{command} imported {report['heavy'][:5]}"
    assert report["code"] in (0, 1, 3), report  # it ran: passed, failed (preflight on this machine) or gates closed


def test_join_without_follow_imports_no_renderer(tmp_path):
    """Every follower job's first step (the plugin's check_leader) reads one meta-data key: it renders nothing, only
    ``join --follow`` does. (No buildkite-agent on the probe's PATH: a one-line error, exit 2.)"""
    assert imported(tmp_path, ["join", "--leader-job", "job-7"]) == {"code": 2, "heavy": []}


def test_a_command_that_renders_installs_the_renderers(tmp_path):
    """The probe can see a renderer: ``report`` loads them (its --help alone does not run it)."""
    (tmp_path / "empty").mkdir()
    report = imported(tmp_path, ["report", str(tmp_path / "empty")])
    assert "afd_e2e.report.junit" in report["heavy"] and report["code"] == 2  # no results.json there: bad input
