"""`afd-e2e run` refuses every bad input that `plan` and `preflight` refuse, before launching anything:
one line naming the problem and the fix, exit status 2, no process started, no results written."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from afd_e2e.cli import main

PORT_BASE = 19900  # this module's ports (unused: nothing may start)


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    """A checkpoint folder as preflight wants it (config, one shard, tokenizer), nothing loaded from it."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    config = {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "num_experts": 8,
        "num_experts_per_tok": 2,
    }
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    (folder / "tokenizer.json").write_text("{}")
    return folder


@pytest.fixture
def launched(monkeypatch) -> list[tuple[str, ...]]:
    """Every process afd-e2e would start in this test (none may be)."""
    started: list[tuple[str, ...]] = []
    original = subprocess.Popen

    def recording(argv, *args, **kwargs):
        started.append(tuple(map(str, argv)))
        return original(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", recording)
    for name in list(os.environ):
        if name.startswith(("AFD_E2E_", "AFD_GPU_E2E_")):
            monkeypatch.delenv(name)
    return started


def a_file(tmp: Path) -> Path:
    path = tmp / "a-file"
    path.write_text("x")
    return path


CASES = {
    "out under /proc": (["--out", "/proc/afd-e2e-out"], "--out /proc/afd-e2e-out is under /proc, a kernel filesystem"),
    "out is a file": (["--out", "{file}"], "is a file, not a folder"),
    "out below a file": (["--out", "{file}/results"], "which is a file"),
    "repeated devices on the CPU profile": (["--devices", "0,0"], "runs on the CPU (fix: drop --devices)"),
    "non-integer devices on the CPU profile": (["--devices", "abc"], "runs on the CPU (fix: drop --devices)"),
    "model folder without config.json": (["--model", "{empty}"], "checkpoint config: "),
    "model folder missing": (["--model", "{tmp}/nowhere"], "is missing, not a directory"),
    "model is a file": (["--model", "{file}"], "is a file, not a directory"),
    "port base above 65535": (["--port-base", "70000"], "outside 1..65535"),
    "port block past 65535": (["--port-base", "65530"], "beyond 65535 (the highest TCP port)"),
    "port base zero": (["--port-base", "0"], "outside 1..65535"),
    "unknown case": (["--case", "nope"], "nope"),
    "missing profile path": (["--profile", "{tmp}/missing.yaml"], "missing.yaml: no such file"),
    "profile YAML syntax error": (
        ["--profile", "{bad_yaml}"],
        "bad.yaml:2:10: YAML syntax error: mapping values are not allowed here",
    ),
    "missing GSM8K folder": (["--gsm8k-dir", "{tmp}/no-gsm8k"], "no-gsm8k"),
    "routing control without an AFD candidate": (["--forced-routing-control"], "--forced-routing-control"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_one_line_exit_2_and_launches_nothing(name, tmp_path, checkpoint, launched, capsys):
    flags, expected = CASES[name]
    (tmp_path / "empty").mkdir()
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("name: x\nengine: a: b\n")
    values = {"file": a_file(tmp_path), "empty": tmp_path / "empty", "tmp": tmp_path, "bad_yaml": bad_yaml}
    flags = [flag.format(**values) for flag in flags]
    argv = ["run", "--profile", "tiny-cpu", "--model", str(checkpoint), "--out", str(tmp_path / "out")]
    argv += ["--port-base", str(PORT_BASE), *flags]  # later flags win

    code = main(argv)

    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("afd-e2e run: error: ") and "(fix: " in err, err
    assert expected in err, err
    assert "Traceback" not in err
    assert launched == []
    assert not (tmp_path / "out" / "results.json").exists()


def test_admission_names_every_reason_a_run_cannot_start_in_one_line(tmp_path, checkpoint, launched, capsys):
    argv = ["run", "--profile", "tiny-cpu", "--model", str(tmp_path / "empty"), "--out", str(a_file(tmp_path))]
    (tmp_path / "empty").mkdir()
    code = main([*argv, "--port-base", str(PORT_BASE), "--gsm8k-dir", str(tmp_path / "no-gsm8k")])

    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    problems, fixes = err.removeprefix("afd-e2e run: error: ").split(" (fix: ")
    assert problems.startswith("checkpoint config: ") and "is a file, not a folder" in problems, err
    assert "no-gsm8k" in problems and "pass --out a folder on a writable disk" in fixes, err
    assert launched == []
