"""The first hour on a new machine (issue 22, item 7): each text that misled a new user, as the CLI now prints it,
with its exit status."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
from pathlib import Path

import yaml

from afd_e2e.cli import main
from afd_e2e.preflight.software import describe_software, read_installed
from afd_e2e.results import load_results
from afd_e2e.workloads.bench import progress_tail
from repo_paths import FIXTURES, REPO

TINY_CPU = REPO / "python" / "afd_e2e" / "profiles" / "tiny-cpu.yaml"


def run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def test_a_misspelt_required_key_is_named_with_the_key_it_meant(tmp_path, capsys):
    profile = tmp_path / "typo.yaml"
    profile.write_text(TINY_CPU.read_text().replace("  port_base: 18400", "  port_bsae: 18400"))
    code, err = run(capsys, "plan", "--profile", str(profile))
    assert code == 2
    assert err.splitlines() == [
        f"afd-e2e plan: error: {profile}: engine.port_base: missing; engine.port_bsae is not a known key "
        "(fix: rename port_bsae to port_base)"
    ]


def test_an_unknown_optional_key_names_the_closest_known_key(tmp_path, capsys):
    profile = tmp_path / "typo.yaml"
    profile.write_text(TINY_CPU.read_text().replace("  port_base: 18400", "  port_base: 18400\n  executabel: vllm"))
    code, err = run(capsys, "plan", "--profile", str(profile))
    assert code == 2
    assert err.splitlines() == [
        f"afd-e2e plan: error: {profile}: engine.executabel: unknown key at engine; the closest known key is "
        "executable (fix: rename it to executable)"
    ]


def test_tiny_cpu_without_model_says_to_pass_the_flag(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("AFD_E2E_TINY_MODEL", raising=False)
    code, err = run(capsys, "run", "--profile", "tiny-cpu", "--out", str(tmp_path / "out"))
    assert code == 2
    assert err.splitlines() == [
        "afd-e2e run: error: profile tiny-cpu needs a model folder: --model was not given and AFD_E2E_TINY_MODEL "
        "is not set (fix: pass --model DIR; to build the tiny model: afd-e2e tiny-model --out .tiny-model, then "
        "--model .tiny-model)"
    ]
    assert not (tmp_path / "out").exists()


def test_a_bad_model_flag_is_named_as_the_flag(tmp_path, capsys):
    code, err = run(capsys, "run", "--profile", "tiny-cpu", "--model", str(tmp_path / "nowhere"))
    assert code == 2
    assert err.splitlines() == [
        f"afd-e2e run: error: profile tiny-cpu: --model {tmp_path / 'nowhere'} is missing, not a directory "
        "(fix: pass --model a checkpoint folder)"
    ]


def test_a_refused_run_leaves_no_out_folder_behind(tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    out = tmp_path / "new" / "out"
    code, err = run(
        capsys,
        "run",
        "--profile",
        "tiny-cpu",
        "--model",
        str(model),
        "--gsm8k-dir",
        str(tmp_path / "no-gsm8k"),
        "--out",
        str(out),
    )
    assert code == 2
    assert f"GSM8K folder {tmp_path / 'no-gsm8k'} does not exist" in err
    assert "point --gsm8k-dir (or AFD_E2E_GSM8K_DIR) to a folder holding GSM8K's train.jsonl" in err
    assert not (tmp_path / "new").exists()


def test_an_existing_out_folder_is_kept_when_a_run_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    code, _ = run(capsys, "run", "--profile", "tiny-cpu", "--model", str(tmp_path / "nowhere"), "--out", str(out))
    assert code == 2
    assert out.is_dir()


def file_at(tmp_path: Path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("not a folder\n")
    return path


def test_cleanup_given_a_file_says_to_pass_the_results_folder(tmp_path, capsys):
    path = file_at(tmp_path)
    assert run(capsys, "cleanup", "--out", str(path)) == (
        2,
        f"afd-e2e cleanup: error: --out {path} is a file, not a folder (fix: pass --out the results folder of the "
        "run to clean up (default afd-e2e-out))\n",
    )


def test_tiny_model_given_a_file_says_to_pass_a_folder(tmp_path, capsys):
    path = file_at(tmp_path)
    assert run(capsys, "tiny-model", "--out", str(path)) == (
        2,
        f"afd-e2e tiny-model: error: --out {path} is a file, not a folder (fix: pass --out a new or existing folder "
        "for the model, e.g. .tiny-model)\n",
    )
    assert path.read_text() == "not a folder\n"


def test_report_given_a_file_says_to_pass_the_results_folder(tmp_path, capsys):
    path = file_at(tmp_path)
    assert run(capsys, "report", str(path)) == (
        2,
        f"afd-e2e report: error: DIR {path} is a file, not a folder (fix: pass the results folder that holds "
        "results.json (the --out of `afd-e2e run`))\n",
    )


def outside_buildkite(monkeypatch) -> None:
    """A new user's shell: no opt-in set, no Buildkite build around."""
    for name in list(os.environ):
        if name.startswith(("AFD_E2E_", "AFD_GPU_E2E_", "BUILDKITE")):
            monkeypatch.delenv(name)


CLOSED_QWEN_GATES = [
    "AFD_E2E_BACKEND is not set; set AFD_E2E_BACKEND=gpu to opt in",
    "AFD_E2E_LARGE_MODEL is not set; set AFD_E2E_LARGE_MODEL=1 to opt in to large-model runs",
    "AFD_GPU_E2E_MODEL is not set; point it at the staged checkpoint directory",
    "AFD_E2E_DEVICES is not set; set AFD_E2E_DEVICES=0,2,4,6,1,3,5,7 (8 unique ids)",
]


def test_pipeline_outside_buildkite_says_no_gpu_step_because_the_gates_are_closed(monkeypatch, capsys):
    outside_buildkite(monkeypatch)
    code = main(["pipeline", "--profile", "qwen3.5-122b-a10b"])
    out, err = capsys.readouterr()
    assert code == 0
    assert err.splitlines() == [
        "afd-e2e pipeline: qwen3.5-122b-a10b: no GPU step (build outside Buildkite): its opt-in gates are closed; "
        "to open them, set the variables named here in the environment of `afd-e2e pipeline` (in Buildkite, the "
        "bootstrap step's env):",
        *(f"  - {gate}" for gate in CLOSED_QWEN_GATES),
    ]
    ((step,),) = [group["steps"] for group in yaml.safe_load(out)["steps"]]
    assert step["env"]["AFD_E2E_ANNOTATION"].splitlines() == [
        "**afd-e2e qwen3.5-122b-a10b** is not run (build outside Buildkite): its opt-in gates are closed; to open "
        "them, set the variables named here in the environment of `afd-e2e pipeline` (in Buildkite, the bootstrap "
        "step's env):",
        "",
        *(f"- {gate}" for gate in CLOSED_QWEN_GATES),
    ]


def without_correctness(tmp_path: Path) -> Path:
    """tiny-cpu with no case running the correctness phase (smoke only, no comparison)."""
    data = yaml.safe_load(TINY_CPU.read_text())
    data["name"] = "smoke-only"
    for case in data["cases"].values():
        case["phases"] = ["smoke"]
    del data["comparisons"]
    path = tmp_path / "smoke-only.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def checkpoint(tmp_path: Path) -> Path:
    """A folder that passes tiny-cpu's checkpoint checks (they come before the phases' inputs)."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    config = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_experts": 8}
    (folder / "config.json").write_text(json.dumps({**config, "num_experts_per_tok": 2}))
    (folder / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    (folder / "tokenizer.json").write_text("{}")
    return folder


def test_a_run_without_a_correctness_phase_starts_without_gsm8k_data(tmp_path, capsys, monkeypatch, vllm_on_path):
    """No GSM8K anywhere: the smoke-only run is admitted and takes its preflight (a held port makes the agent a
    misfit, so nothing is launched); the same run with tiny-cpu's correctness phase is refused, naming GSM8K."""
    outside_buildkite(monkeypatch)
    model, out = checkpoint(tmp_path), tmp_path / "out"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = str(holder.getsockname()[1])
        argv = ["run", "--model", str(model), "--port-base", port, "--out", str(out)]
        code = main([*argv, "--profile", str(without_correctness(tmp_path))])
        ran = capsys.readouterr()
        refused = run(capsys, *argv, "--profile", "tiny-cpu")
    assert code == 1 and "GSM8K" not in ran.err
    assert ran.out.splitlines()[-1] == f"results: {(out / 'results.json').resolve()} (failed)"
    assert "the agent does not fit profile smoke-only: nothing launched" in ran.out
    assert load_results(out).verdict.reasons[0].startswith(f"preflight ports: {port} held by pid {os.getpid()}")
    assert refused == (
        2,
        "afd-e2e run: error: no GSM8K data: AFD_E2E_GSM8K_DIR is not set (fix: set AFD_E2E_GSM8K_DIR or pass "
        "--gsm8k-dir a folder holding GSM8K's train.jsonl and test.jsonl (e.g. ../shared/datasets/gsm8k))\n",
    )


def copied_results(name: str, tmp_path: Path) -> Path:
    out = tmp_path / name
    out.mkdir()
    shutil.copy(FIXTURES / "results" / name / "results.json", out / "results.json")
    return out


def test_the_preflight_table_says_it_lists_the_checks_not_passed_and_names_the_passed(tmp_path, capsys):
    out = copied_results("tiny-cpu", tmp_path)
    assert main(["report", str(out)]) == 0
    lines = (out / "annotation.md").read_text(encoding="utf-8").splitlines()
    start = lines.index(next(line for line in lines if line.startswith("**Preflight**")))
    assert lines[start : start + 5] == [
        "**Preflight** ✅ passed: ⏭️ 11 skipped · ✅ 10 passed in 0.07 s",
        "",
        "Checks not passed (11 of 21; passed: ports, checkpoint folder, checkpoint config, checkpoint model, "
        "checkpoint experts, checkpoint weights, checkpoint size, tokenizer, hub offline, vllm):",
        "",
        "| Check | Status | Measured | Wanted | Fix |",
    ]
    assert len([line for line in lines[start + 6 :] if line.startswith("| ") and "⏭️ skipped" in line]) == 11


def software_line(out: Path) -> str:
    return next(line for line in (out / "annotation.md").read_text(encoding="utf-8").splitlines() if "Software" in line)


def test_the_software_found_is_one_sentence_with_nothing_not_looked_for_called_missing(tmp_path, capsys):
    cpu, gpu = copied_results("tiny-cpu", tmp_path), copied_results("tiny-gpu-forensics-1gpu", tmp_path)
    assert main(["report", str(cpu)]) == main(["report", str(gpu)]) == 0
    assert software_line(cpu) == (
        "Software: vLLM 0\\.32\\.0\\+cpu with torch 2\\.13\\.0\\+cpu in /work/main/\\.venv/bin/python \\(the Python of "
        "/work/main/\\.venv/bin/vllm\\); no AFD plugin installed; nvidia\\-ml\\-py 13\\.580\\.82; afd\\-e2e runs in "
        "/work/main/\\.venv/bin/python\\."
    )
    assert software_line(gpu) == (
        "Software: vLLM 0\\.26\\.0 with torch 2\\.11\\.0 in /opt/torch/\\.venv/bin/python3 \\(the Python of "
        "/tmp/vl/site/bin/vllm\\); AFD plugin afd\\_plugin\\:register\\_afd 0\\.0\\.0\\+g2e4378f; nvidia\\-ml\\-py "
        "13\\.610\\.43; afd\\-e2e runs in /opt/torch/\\.venv/bin/python3\\."
    )


def test_software_with_no_vllm_says_why_in_the_same_sentence():
    installed = read_installed("afd-e2e-no-such-vllm")
    assert describe_software(installed.to_record()) == (
        f"no vllm executable found: no 'afd-e2e-no-such-vllm' executable next to {sys.executable} or on PATH; "
        f"nvidia-ml-py {installed.nvidia_ml_py}; afd-e2e runs in {sys.executable}."
    )


def test_profiles_says_smoke_once(capsys):
    assert main(["profiles"]) == 0
    assert "tiny-cpu [SMOKE]: tiny random-weight MoE on vLLM's CPU backend, TP1 vs TP2 (accuracy not meaningful)" in (
        capsys.readouterr().out.splitlines()
    )
    assert main(["profiles", "tiny-cpu"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "tiny-cpu [SMOKE]: tiny random-weight MoE on vLLM's CPU backend, TP1 vs TP2 (accuracy not meaningful)"
    )


BENCH_LOG = FIXTURES / "results" / "tiny-gpu-capacity-1gpu" / "capacity" / "native-dp1" / "level-14-rep-1.log"


def test_bench_progress_is_a_request_count_never_a_bar_or_a_rule(tmp_path):
    """The heartbeat reads the tail of a real ``vllm bench serve`` log as it grows: mid-run it is tqdm's count,
    once done the last line of numbers, never the bar's blocks or the closing rule of '='."""
    text = BENCH_LOG.read_bytes()
    log = tmp_path / "bench.log"
    mid_run = text.index(b"\r", text.index(b"| 7/128 [")) + 1
    log.write_bytes(text[:mid_run])
    assert progress_tail(log) == "7/128 requests done"
    log.write_bytes(text)
    assert text.rstrip().endswith(b"=" * 50)
    assert progress_tail(log) == "P99 E2EL (ms):" + " " * 27 + "203.59"
