"""``afd-e2e run`` refuses before launching anything: closed gates (every reason) and ports already in use."""

from __future__ import annotations

import json
import os
import socket

import pytest

from afd_e2e.cli import main
from afd_e2e.plan.gates import BACKEND_ENV
from afd_e2e.profile import load_profile
from afd_e2e.results import Status, load_results
from afd_e2e.runner.admission import gate_environment
from repo_paths import GSM8K_DIR


@pytest.fixture(autouse=True)
def no_opt_in(monkeypatch):
    for name in list(os.environ):
        if name.startswith(("AFD_E2E_", "AFD_GPU_E2E_")):
            monkeypatch.delenv(name)


def test_a_closed_gate_prints_every_reason_and_exits_3(tmp_path, capsys):
    code = main(["run", "--profile", "qwen3.5-122b-a10b", "--out", str(tmp_path)])

    err = capsys.readouterr().err
    assert code == 3
    assert "profile qwen3.5-122b-a10b not run: its opt-in gates are closed" in err
    for variable in ("AFD_E2E_BACKEND", "AFD_E2E_LARGE_MODEL", "AFD_GPU_E2E_MODEL", "AFD_E2E_DEVICES"):
        assert f"  - {variable}" in err
    assert not (tmp_path / "results.json").exists()


def test_the_embedded_default_needs_only_its_model(tmp_path, capsys):
    assert gate_environment(load_profile("tiny-cpu"), {})[BACKEND_ENV] == "cpu"
    assert BACKEND_ENV not in gate_environment(load_profile("qwen3.5-122b-a10b"), {})

    code = main(["run", "--profile", "tiny-cpu", "--out", str(tmp_path)])

    assert code == 2  # running the CPU profile is the opt-in: only the model folder is missing (first-hour tests)
    assert "--model was not given and AFD_E2E_TINY_MODEL is not set" in capsys.readouterr().err


def test_a_port_in_use_is_a_recorded_preflight_misfit_before_anything_starts(tmp_path, capsys, vllm_on_path):
    out = tmp_path / "out"
    ckpt = tmp_path / "ckpt"  # passes the checkpoint checks, which come first
    ckpt.mkdir()
    config = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_experts": 8}
    config["num_experts_per_tok"] = 2
    (ckpt / "config.json").write_text(json.dumps(config))
    (ckpt / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    (ckpt / "tokenizer.json").write_text("{}")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))  # a port no concurrent test holds; the plan's block starts there
        holder.listen()
        port = holder.getsockname()[1]
        argv = ["run", "--profile", "tiny-cpu", "--model", str(ckpt), "--port-base", str(port), "--out", str(out)]
        code = main([*argv, "--gsm8k-dir", str(GSM8K_DIR)])

    assert code == 1, capsys.readouterr().err
    results = load_results(out)
    assert results.preflight is not None and results.preflight.status is Status.FAILED
    ports = next(c for c in results.preflight.checks if c.name == "ports")
    assert ports.status is Status.FAILED and f"pid {os.getpid()}" in ports.measured
    assert results.cases == {} and results.status is Status.FAILED
    assert any(reason.startswith("preflight ports: ") for reason in results.verdict.reasons)
    assert not (out / "run-record.json").exists()  # nothing was launched
    annotation = (out / "annotation.md").read_text(encoding="utf-8")
    assert "**Preflight** ❌ failed" in annotation and "| ports | ❌ failed |" in annotation
