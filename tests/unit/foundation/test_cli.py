"""The CLI as a user runs it: plan text and JSON, gates exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import shlex

from afd_e2e.cli import main
from afd_e2e.errors import UsageError
from afd_e2e.system.executables import resolve_executable


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_text_lists_five_cases_in_launch_order(capsys):
    code, out, _ = run(capsys, "plan", "--profile", "qwen3.5-122b-a10b", "--devices", "0,2,4,6,1,3,5,7")
    assert code == 0
    headers = [line for line in out.splitlines() if line.startswith("## case")]
    assert headers == [
        "## case baseline-eager: native DP4/TP1/EP4 — phases smoke, correctness",
        "## case afd-eager-4a4f: AFD 4A4F — phases smoke, correctness, performance",
        "## case native-eager-dp8: native DP8/TP1/EP8 — phases smoke, performance",
        "## case native-dp8-serving: native DP8/TP1/EP8 — phases smoke, capacity",
        "## case afd-4a4f-serving: AFD 4A4F — phases smoke, capacity",
    ]
    afd = out.split("## case afd-eager-4a4f")[1].split("## case")[0]
    assert afd.index("# 1. ffn (devices 1,3,5,7)") < afd.index("# 2. attention (devices 0,2,4,6)")
    assert "5 cases, 5 model loads" in out


def test_plan_text_commands_are_pasteable(capsys, monkeypatch, vllm_on_path):
    monkeypatch.setenv("AFD_GPU_E2E_MODEL", "/models/q")
    _, out, _ = run(capsys, "plan", "--profile", "qwen3.5-122b-a10b", "--case", "afd-eager-4a4f")
    command_lines = [line for line in out.splitlines() if line.startswith("  setsid ")]
    argv = shlex.split(command_lines[0].removeprefix("  setsid ").removesuffix(" &"))
    assert argv[0] == resolve_executable("vllm") and os.path.isabs(argv[0])  # pastes without the venv on PATH
    assert argv[1:3] == ["serve", "/models/q"]
    assert argv[argv.index("--additional-config") + 1].startswith('{"afd":{"role":"ffn"')


def test_plan_text_says_how_when_the_executable_is_not_here(capsys, monkeypatch):
    def missing(name):
        raise UsageError(f"no {name!r} executable next to /x/python or on PATH", "install vLLM into this environment")

    monkeypatch.setattr("afd_e2e.commands.plan.resolve_executable", missing)
    _, out, _ = run(capsys, "plan", "--profile", "tiny-cpu", "--model", "/m")
    assert out.splitlines()[0] == (
        "# no 'vllm' executable next to /x/python or on PATH: install vLLM into this environment;"
        " the commands below need vllm on PATH"
    )
    assert "  setsid vllm serve /m" in out


def test_plan_json_matches_text(capsys):
    code, out, _ = run(capsys, "plan", "--profile", "qwen3.5-122b-a10b", "--devices", "0,2,4,6,1,3,5,7", "--json")
    data = json.loads(out)
    assert code == 0 and [c["id"] for c in data["cases"]] == [
        "baseline-eager",
        "afd-eager-4a4f",
        "native-eager-dp8",
        "native-dp8-serving",
        "afd-4a4f-serving",
    ]
    assert [p["name"] for p in data["cases"][1]["processes"]] == ["ffn", "attention"]


def test_bad_devices_flag_is_one_line_error(capsys):
    code, _, err = run(capsys, "plan", "--profile", "qwen3.5-122b-a10b", "--devices", "0,1,2")
    assert code == 2 and err.count("\n") == 1 and "lists 3 devices" in err and "fix:" in err


def test_unknown_case_names_the_known_ones(capsys):
    code, _, err = run(capsys, "plan", "--profile", "qwen3.5-122b-a10b", "--case", "afd-8a8f")
    assert code == 2 and "use one of: baseline-eager, afd-eager-4a4f, native-eager-dp8, native-dp8-serving" in err


def test_gates_exit_codes(capsys, monkeypatch, tmp_path):
    for name in ("AFD_E2E_BACKEND", "AFD_E2E_LARGE_MODEL", "AFD_GPU_E2E_MODEL", "AFD_E2E_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    code, out, _ = run(capsys, "gates", "--profile", "qwen3.5-122b-a10b")
    assert code == 3 and "closed" in out
    monkeypatch.setenv("AFD_E2E_BACKEND", "gpu")
    monkeypatch.setenv("AFD_E2E_LARGE_MODEL", "1")
    monkeypatch.setenv("AFD_GPU_E2E_MODEL", str(tmp_path))
    monkeypatch.setenv("AFD_E2E_DEVICES", "0,2,4,6,1,3,5,7")
    code, out, _ = run(capsys, "gates", "--profile", "qwen3.5-122b-a10b", "--json")
    assert code == 0 and json.loads(out)["status"] == "open"
    monkeypatch.setenv("AFD_E2E_DEVICES", "0,2,4,6,1,3,5,x")
    code, out, _ = run(capsys, "gates", "--profile", "qwen3.5-122b-a10b")
    assert code == 2 and "'x' is not an integer" in out


def test_profiles_lists_and_describes(capsys):
    code, out, _ = run(capsys, "profiles")
    assert code == 0 and "tiny-cpu [SMOKE]" in out
    code, out, _ = run(capsys, "profiles", "qwen3.5-122b-a10b")
    assert "case afd-eager-4a4f: AFD 4A4F" in out
