"""Driving ``vllm bench serve``: argv, judging its result JSON (real ones from the CPU vLLM), bounded runs."""

from __future__ import annotations

import copy
import json
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from afd_e2e.profile import BenchSpec
from afd_e2e.workloads import bench
from repo_paths import FIXTURES

SPEC = BenchSpec(
    dataset="random",
    input_len=64,
    output_len=16,
    num_prompts=16,
    request_rate=8.0,
    max_concurrency=4,
    temperature=0.0,
    seed=0,
    warmups=1,
    repetitions=2,
    parity_threshold_pct=10.0,
    timeout_s=30.0,
)


def _copy(name: str, tmp_path: Path, **changes) -> Path:
    data = json.loads((FIXTURES / "vllm_bench" / name).read_text(encoding="utf-8"))
    data.update(changes)
    path = tmp_path / "rep-1.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_argv_carries_the_workload():
    argv = bench.bench_argv(
        "/venv/bin/vllm",
        SPEC,
        base_url="http://127.0.0.1:19500",
        model="tiny-moe",
        tokenizer="/m",
        result_dir=Path("/out/bench/c"),
        result_file="rep-2.json",
    )
    text = " ".join(argv)
    assert argv[:3] == ["/venv/bin/vllm", "bench", "serve"]
    for flags in (
        "--base-url http://127.0.0.1:19500 --endpoint /v1/completions --model tiny-moe --tokenizer /m",
        "--dataset-name random --random-input-len 64 --random-output-len 16 --num-prompts 16 --request-rate 8",
        "--max-concurrency 4 --seed 0 --temperature 0 --ignore-eos",
        "--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99",
        "--save-result --result-dir /out/bench/c --result-filename rep-2.json",
    ):
        assert flags in text


def test_real_passed_result(tmp_path):
    rep = bench.read_result(_copy("passed.json", tmp_path), 16)
    assert (rep.status, rep.failure, rep.completed, rep.failed) == ("passed", None, 16, 0)
    metrics = rep.metrics
    for key in ("request_throughput", "output_throughput", "mean_ttft_ms", "p99_e2el_ms", "median_itl_ms"):
        assert metrics[key] > 0
    assert rep.duration_s == pytest.approx(2.0586, abs=1e-3)


def test_real_all_failed_result_fails_despite_exit_code_zero(tmp_path):
    rep = bench.read_result(_copy("all-failed.json", tmp_path), 8)
    assert (rep.status, rep.failure) == ("failed", "8 of 8 requests failed")


def test_incomplete_missing_and_broken_results(tmp_path):
    assert bench.read_result(_copy("passed.json", tmp_path, completed=12), 16).failure == "completed 12 of 16 prompts"
    assert bench.read_result(tmp_path / "absent.json", 16).failure == "no result JSON absent.json"
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    assert bench.read_result(tmp_path / "broken.json", 16).failure.startswith("unreadable result JSON broken.json")
    assert "lacks completed/failed" in bench.read_result(_copy("passed.json", tmp_path, failed=None), 16).failure


def _run(argv, tmp_path, timeout_s=30.0, cancelled=None):
    lines: list[str] = []
    rep, ended = bench.run_repetition(
        argv,
        result_path=tmp_path / "rep-1.json",
        log_path=tmp_path / "rep-1.log",
        num_prompts=16,
        timeout_s=timeout_s,
        label="case rep 1/1",
        progress=lines.append,
        cancelled=cancelled or threading.Event(),
        heartbeat_s=0.2,
    )
    return rep, ended, lines


def test_exit_code_is_named_when_no_json_came(tmp_path):
    rep, ended, _ = _run([sys.executable, "-c", "raise SystemExit(3)"], tmp_path)
    assert ended and rep.failure == "no result JSON rep-1.json (vllm bench serve exited 3)"


def test_a_stale_result_file_is_not_taken_for_this_run(tmp_path):
    _copy("passed.json", tmp_path)
    rep, _, _ = _run([sys.executable, "-c", "pass"], tmp_path)
    assert rep.failure == "no result JSON rep-1.json"


def test_timeout_stops_the_bench_and_reports_progress(tmp_path):
    script = "import sys, time\nfor i in range(100):\n    print(f'{i}/100', flush=True)\n    time.sleep(0.1)"
    rep, ended, lines = _run([sys.executable, "-c", script], tmp_path, timeout_s=1.0)
    assert not ended and rep.status == "failed" and rep.failure == "timed out after 1 s"
    assert lines and all(line.startswith("case rep 1/1: ") for line in lines)
    assert any("/100" in line for line in lines)


def test_cancel_stops_the_bench(tmp_path):
    cancelled = threading.Event()
    threading.Timer(0.5, cancelled.set).start()
    rep, ended, _ = _run([sys.executable, "-c", "import time; time.sleep(30)"], tmp_path, cancelled=cancelled)
    assert not ended and (rep.status, rep.failure) == ("cancelled", "cancelled")


def _fake_bench(tmp_path: Path, body: str) -> str:
    """An executable standing in for `vllm` (only its exit and files matter to the series)."""
    path = tmp_path / "fake-vllm"
    path.write_text(f"#!{sys.executable}\nimport sys, time\n{body}\n", encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def _series(tmp_path, executable, cancelled=None, spec=SPEC):
    published = []
    section = bench.run_series(
        spec,
        executable=executable,
        base_url="http://127.0.0.1:9",
        model="m",
        tokenizer="/m",
        out_dir=tmp_path,
        case_id="cpu-tp1",
        publish=lambda s: published.append(copy.deepcopy(s)),
        progress=lambda _: None,
        cancelled=cancelled or threading.Event(),
        heartbeat_s=0.2,
    )
    return section, published


def test_series_writes_warmup_and_repetitions_and_keeps_going_after_a_failure(tmp_path):
    passed = (FIXTURES / "vllm_bench" / "passed.json").read_text(encoding="utf-8")
    body = (
        "args = sys.argv\nout = args[args.index('--result-dir') + 1] + '/' + args[args.index('--result-filename') + 1]\n"
        f"if not out.endswith('rep-1.json'):\n    open(out, 'w').write({passed!r})"
    )
    section, published = _series(tmp_path, _fake_bench(tmp_path, body))
    assert [w.status for w in section.warmups] == ["passed"]
    assert [(r.index, r.status) for r in section.repetitions] == [(1, "failed"), (2, "passed")]
    assert section.status == "failed" and section.failure == "rep 1: no result JSON rep-1.json"
    assert section.repetitions[1].path == "bench/cpu-tp1/rep-2.json"
    assert (tmp_path / "bench/cpu-tp1/warmup-1.json").exists() and (tmp_path / "bench/cpu-tp1/rep-2.log").exists()
    assert len(published) == 4 and published[-1] == section


def test_series_stops_after_a_timeout(tmp_path):
    section, _ = _series(tmp_path, _fake_bench(tmp_path, "time.sleep(30)"), spec=replace(SPEC, timeout_s=1.0))
    assert section.status == "failed" and section.failure == "warmup 1: timed out after 1 s"
    assert section.repetitions == []


def test_series_cancelled_before_start_records_nothing(tmp_path):
    cancelled = threading.Event()
    cancelled.set()
    section, _ = _series(tmp_path, _fake_bench(tmp_path, "pass"), cancelled)
    assert (section.status, section.warmups, section.repetitions) == ("cancelled", [], [])
