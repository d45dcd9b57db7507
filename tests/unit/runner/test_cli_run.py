"""``afd-e2e run`` refuses before launching anything: closed gates (every reason) and ports already in use."""

from __future__ import annotations

import os
import socket

import pytest
from stand_ins import UNIT_PORT_BASE

from afd_e2e.cli import main
from afd_e2e.commands.run import gate_environment
from afd_e2e.gates import BACKEND_ENV
from afd_e2e.profile import load_profile
from afd_e2e.results import Status, load_results


@pytest.fixture(autouse=True)
def no_opt_in(monkeypatch):
    for name in list(os.environ):
        if name.startswith(("AFD_E2E_", "AFD_GPU_E2E_")):
            monkeypatch.delenv(name)


def test_a_closed_gate_prints_every_reason_and_exits_nonzero(tmp_path, capsys):
    code = main(["run", "--profile", "qwen3.5-122b-a10b", "--out", str(tmp_path)])

    err = capsys.readouterr().err
    assert code == 1
    assert "profile qwen3.5-122b-a10b may not run here (closed)" in err
    for variable in ("AFD_E2E_BACKEND", "AFD_E2E_LARGE_MODEL", "AFD_GPU_E2E_MODEL", "AFD_E2E_DEVICES"):
        assert f"  - {variable}" in err
    assert not (tmp_path / "results.json").exists()


def test_the_embedded_default_needs_only_its_model(tmp_path, capsys):
    assert gate_environment(load_profile("tiny-cpu"))[BACKEND_ENV] == "cpu"
    assert BACKEND_ENV not in gate_environment(load_profile("qwen3.5-122b-a10b"))

    code = main(["run", "--profile", "tiny-cpu", "--out", str(tmp_path)])

    assert code == 1
    assert capsys.readouterr().err.splitlines()[1:] == [
        "  - AFD_E2E_TINY_MODEL is not set; point it at the staged checkpoint directory"
    ]


def test_a_port_in_use_is_a_recorded_preflight_misfit_before_anything_starts(tmp_path, capsys):
    port = UNIT_PORT_BASE + 50
    out = tmp_path / "out"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        code = main(
            ["run", "--profile", "tiny-cpu", "--model", str(tmp_path), "--port-base", str(port), "--out", str(out)]
        )

    assert code == 1
    results = load_results(out)
    assert results.preflight is not None and results.preflight.status is Status.FAILED
    ports = next(c for c in results.preflight.checks if c.name == "ports")
    assert ports.status is Status.FAILED and f"pid {os.getpid()}" in ports.measured
    assert results.cases == {} and results.status is Status.FAILED
    assert any(reason.startswith("preflight ports: ") for reason in results.verdict.reasons)
    assert not (out / "run-record.json").exists()  # nothing was launched
    annotation = (out / "annotation.md").read_text(encoding="utf-8")
    assert "**Preflight** ❌ failed" in annotation and "| ports | ❌ failed |" in annotation
